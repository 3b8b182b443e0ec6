"""ApiVersions (18) and Metadata (3): what a client asks first on every connection."""

from kafkawire.protocol.api import Api
from kafkawire.protocol.schema import Field as F

# Operations bit fields are INT32_MIN when the client did not ask for them.
_NO_OPS = -(2**31)

API_VERSIONS = Api(
    18, "ApiVersions", (0, 4), flexible_from=3,
    request=[
        F("client_software_name", "string", since=3),
        F("client_software_version", "string", since=3),
    ],
    response=[
        F("error_code", "int16"),
        F("api_keys", array=True, struct_name="ApiVersion", fields=[
            F("api_key", "int16"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ]),
        F("throttle_time_ms", "int32", since=1),
        F("supported_features", array=True, since=3, tag=0, struct_name="SupportedFeature", fields=[
            F("name", "string"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ]),
        F("finalized_features_epoch", "int64", since=3, tag=1, default=-1),
        F("finalized_features", array=True, since=3, tag=2, struct_name="FinalizedFeature", fields=[
            F("name", "string"),
            F("max_version_level", "int16"),
            F("min_version_level", "int16"),
        ]),
        F("zk_migration_ready", "bool", since=3, tag=3),
    ],
)

METADATA = Api(
    3, "Metadata", (0, 13), flexible_from=9,
    request=[
        # v0: an empty array means "all topics"; v1+: null means all, empty means none.
        F("topics", array=True, nullable_since=1, struct_name="MetadataRequestTopic", fields=[
            F("topic_id", "uuid", since=10),
            F("name", "string", nullable_since=10),
        ]),
        F("allow_auto_topic_creation", "bool", since=4, default=True),
        F("include_cluster_authorized_operations", "bool", since=8, until=10),
        F("include_topic_authorized_operations", "bool", since=8),
    ],
    response=[
        F("throttle_time_ms", "int32", since=3),
        F("brokers", array=True, struct_name="MetadataResponseBroker", fields=[
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", since=1, nullable_since=1, default=None),
        ]),
        F("cluster_id", "string", since=2, nullable_since=2, default=None),
        F("controller_id", "int32", since=1, default=-1),
        F("topics", array=True, struct_name="MetadataResponseTopic", fields=[
            F("error_code", "int16"),
            F("name", "string", nullable_since=12),
            F("topic_id", "uuid", since=10),
            F("is_internal", "bool", since=1),
            F("partitions", array=True, struct_name="MetadataResponsePartition", fields=[
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", since=7, default=-1),
                F("replica_nodes", "[]int32"),
                F("isr_nodes", "[]int32"),
                F("offline_replicas", "[]int32", since=5),
            ]),
            F("topic_authorized_operations", "int32", since=8, default=_NO_OPS),
        ]),
        F("cluster_authorized_operations", "int32", since=8, until=10, default=_NO_OPS),
        F("error_code", "int16", since=13),
    ],
)
