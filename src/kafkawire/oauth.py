"""OAUTHBEARER token providers for logins to managed clusters, for ``sasl_oauth_token_provider``.

* :class:`OidcTokenProvider` fetches tokens from an OAuth 2 / OIDC token endpoint (KIP-768);
  the options ``sasl_oauthbearer_token_endpoint_url``, ``sasl_oauthbearer_client_id`` and
  ``sasl_oauthbearer_client_secret`` build one for you.
* :class:`MskIamTokenProvider` signs AWS MSK IAM tokens with AWS's own signer
  (``pip install 'kafkawire[msk-iam]'``).

Both hold their token until 80-85% of its life, so a connection's KIP-368 re-login before
then reuses it and one after gets a new one.
"""

from __future__ import annotations

from kafkawire.core.oidc import MskIamTokenProvider, OidcTokenProvider
from kafkawire.protocol.sasl import (
    OAuthBearerCredentialsError,
    OAuthBearerEndpointError,
    OAuthBearerEndpointTimeoutError,
    OAuthBearerLoginError,
    OAuthBearerToken,
    OAuthBearerTokenResponseError,
    OidcLogin,
)

__all__ = ["MskIamTokenProvider", "OidcTokenProvider", "OidcLogin", "OAuthBearerToken",
           # what a token fetch raises (also importable from kafkawire.protocol.sasl)
           "OAuthBearerLoginError", "OAuthBearerCredentialsError", "OAuthBearerTokenResponseError",
           "OAuthBearerEndpointError", "OAuthBearerEndpointTimeoutError"]
