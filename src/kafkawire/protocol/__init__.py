"""kafkawire's sans-IO protocol layer: schema, API declarations, headers, connection.

Nothing here does I/O: feed bytes in, get request/response objects out, and the other way.
"""

from kafkawire.protocol.api import Api, ApiVersionError
from kafkawire.protocol.schema import Field, Struct, Writer

__all__ = ["Api", "ApiVersionError", "Field", "Struct", "Writer"]
