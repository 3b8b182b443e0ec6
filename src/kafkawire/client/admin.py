"""The admin client: topics, partitions, configs, consumer groups and their offsets.

::

    with Admin(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("events", num_partitions=3)])
        admin.list_group_offsets("billing")        # {TopicPartition: OffsetAndMetadata}
        admin.group_lag("billing").total

Results and errors
------------------
Every call takes ``timeout`` (seconds; default ``request_timeout_ms``) and returns by then.

* A call about several items (topics, groups, partitions, config resources) returns a dict
  from item to its result.  Items the broker refused hold the exception (a
  :class:`~kafkawire.errors.BrokerError` subclass carrying the Kafka ``code``), and with
  ``raise_on_error=True`` (the default) the call then raises :class:`AdminError`, whose
  message names every failed item and whose ``results`` / ``errors`` keep them all.  Pass
  ``raise_on_error=False`` to get the dict back with failures in it.  Successful items
  of calls that have nothing to return (deletes, alters) map to None.
* The whole call raises when it cannot be done at all: :class:`KafkaTimeoutError` when
  the deadline passes with work still pending (its message names what and the last
  error), :class:`~kafkawire.protocol.api.ApiVersionError` when the broker does not
  speak the API (naming the API and the broker's range), a connection error when no
  broker can be reached, and the broker's error for a group-wide refusal in the calls
  about one group.

Retriable answers (no leader yet, not the controller, coordinator moving or loading,
connection lost) are retried with backoff (``retry_backoff_ms`` doubling up to
``retry_backoff_max_ms``) until the deadline.  Requests about a group go to the group's
coordinator (FindCoordinator first); topic creation and deletion go to the controller.

Not thread-safe: call it from one thread.  :class:`kafkawire.aio.AsyncAdmin` makes the
same calls from asyncio; both run the requests and decisions of
:mod:`kafkawire.protocol.admin`.

After ``os.fork()`` an Admin made before the fork goes on in the child: right after the
fork the child's copy lets go of the parent's connections without touching them (see
:mod:`kafkawire.core.fork`), and connects again on its next call.  Parent and child
then each use their own connections.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

from kafkawire.client.cluster import Cluster
from kafkawire.core.config import Config, merge_options
from kafkawire.errors import ClientClosedError
from kafkawire.protocol.admin import *  # noqa: F403 - the result types, defined with the calls
from kafkawire.protocol.admin import RESULT_TYPES, AdminCore, Op
from kafkawire.protocol.fetcher import OffsetAndTimestamp
from kafkawire.protocol.steps import Request
from kafkawire.protocol import share_admin

__all__ = ["Admin", *RESULT_TYPES]


class Admin:
    """A Kafka admin client.  Options are the Java client's in snake_case
    (``bootstrap_servers``, ``request_timeout_ms``, ``client_id``, ...).

    See the module docstring for how results and errors come back.  The constructor
    waits for no broker (it refuses only bootstrap host names that resolve nowhere);
    each call connects as it needs, raising a refusal no wait fixes (TLS, a login) at once.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **options: Any):
        self.config = c = Config.client(**merge_options("Admin", config, options))
        self.cluster = Cluster(c)
        try:
            self.cluster.check_addresses()  # no broker is asked: each call bootstraps as needed
        except BaseException:
            self.cluster.close()
            raise
        self._core = AdminCore(c, self.cluster.meta)
        self._closed = False

    def close(self) -> None:
        """Close every connection (idempotent)."""
        if not self._closed:
            self._closed = True
            self.cluster.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, op: Op, timeout: float | None) -> Any:
        """Run ``op`` here to its end, by its deadline: connecting, sending and waiting
        for what its steps ask (a metadata refresh and the sleeps are the cluster's)."""
        if self._closed:
            raise ClientClosedError("the admin client is closed")
        budget = self._core.budget(timeout, time.monotonic())

        def prepare(step: Request, conn: Any) -> tuple[int, Any]:
            return self._core.prepare(op.name, step, conn.name, conn.protocol, budget.deadline, time.monotonic())

        return self.cluster.run(op.steps(budget), budget.deadline, op.name, prepare=prepare,
                                late=lambda step, conn: self._core.late(op.name, step.api, conn.name))

    # -- cluster and topics ------------------------------------------------------------

    def describe_cluster(self, timeout: float | None = None, *, include_fenced_brokers: bool = False
                         ) -> ClusterDescription:
        """The cluster id, the controller's node id and every broker (from Metadata).  With
        ``include_fenced_brokers`` (DescribeCluster v2, Kafka 4.0) the brokers the controller
        has fenced (stopped, or not heartbeating) are listed too, with ``fenced`` True."""
        return self._call(self._core.describe_cluster(include_fenced_brokers), timeout)

    def list_topics(self, timeout: float | None = None, include_internal: bool = False
                    ) -> dict[str, TopicDescription]:
        """Every topic of the cluster, by name (internal ones such as __consumer_offsets
        only with ``include_internal``)."""
        return self._call(self._core.list_topics(include_internal), timeout)

    def describe_topics(self, topics: Iterable[str], timeout: float | None = None,
                        raise_on_error: bool = True) -> dict[str, TopicDescription]:
        """Partitions, leaders and replicas of each topic; a missing topic holds
        UnknownTopicOrPartitionError (topics are never auto-created here)."""
        return self._call(self._core.describe_topics(topics, raise_on_error), timeout)

    def create_topics(self, topics: Iterable[NewTopic | str], *, num_partitions: int = -1,
                      replication_factor: int = -1, configs: Mapping[str, str] | None = None,
                      validate_only: bool = False, timeout: float | None = None,
                      raise_on_error: bool = True) -> dict[str, CreatedTopic]:
        """Create topics.  Names given as strings take ``num_partitions``,
        ``replication_factor`` and ``configs`` from the keyword arguments (-1: the
        broker's default).  ``validate_only`` asks the broker to check without creating."""
        return self._call(self._core.create_topics(topics, num_partitions, replication_factor, configs, validate_only,
                                                     raise_on_error), timeout)

    def delete_topics(self, topics: Iterable[str], timeout: float | None = None,
                      raise_on_error: bool = True) -> dict[str, None]:
        """Delete topics; a topic that does not exist holds UnknownTopicOrPartitionError."""
        return self._call(self._core.delete_topics(topics, raise_on_error), timeout)

    def create_partitions(self, new_counts: Mapping[str, int], *, validate_only: bool = False,
                          timeout: float | None = None, raise_on_error: bool = True) -> dict[str, None]:
        """Raise each topic's partition count to the given total (it can only grow)."""
        return self._call(self._core.create_partitions(new_counts, validate_only, raise_on_error), timeout)

    # -- partitions: offsets and records -------------------------------------------------

    def list_offsets(self, specs: Mapping[Any, str | int], *, read_committed: bool = False,
                     timeout: float | None = None, raise_on_error: bool = True
                     ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by partition: spec "earliest", "latest", "max_timestamp" (the record
        with the largest timestamp and that timestamp, KIP-734: ListOffsets v7+), or a
        timestamp in ms (the first offset with a timestamp at or after it; offset -1 when
        there is none)."""
        return self._call(self._core.list_offsets(specs, read_committed, raise_on_error), timeout)

    def delete_records(self, before: Mapping[Any, int], timeout: float | None = None,
                       raise_on_error: bool = True) -> dict[TopicPartition, DeletedRecords]:
        """Delete every record below the given offset of each partition (-1: below the
        high watermark, i.e. all); returns each partition's new low watermark."""
        return self._call(self._core.delete_records(before, raise_on_error), timeout)

    # -- groups ----------------------------------------------------------------------------

    def list_groups(self, timeout: float | None = None) -> dict[str, GroupListing]:
        """Every group the brokers coordinate (ListGroups to each broker), by group id."""
        return self._call(self._core.list_groups(), timeout)

    def describe_groups(self, group_ids: Iterable[str], timeout: float | None = None,
                        raise_on_error: bool = True) -> dict[str, GroupDescription]:
        """State, protocol and members (with their decoded assignments) of each group,
        from its coordinator: a classic group's with DescribeGroups, a KIP-848 group's
        (``group_type`` "consumer") with ConsumerGroupDescribe, which adds the group and
        assignment epochs, the server-side assignor (``protocol``) and each member's
        epoch, rack, subscription and target assignment.  An unknown group comes back in
        state "Dead" (``group_type`` None), as Kafka described one before DescribeGroups v6."""
        return self._call(self._core.describe_groups(group_ids, raise_on_error), timeout)

    def delete_groups(self, group_ids: Iterable[str], timeout: float | None = None,
                      raise_on_error: bool = True) -> dict[str, None]:
        """Delete groups and their committed offsets; a group with members holds
        NonEmptyGroupError, an unknown one GroupIdNotFoundError."""
        return self._call(self._core.delete_groups(group_ids, raise_on_error), timeout)

    def list_group_offsets(self, group_id: str, partitions: Iterable[Any] | None = None,
                           timeout: float | None = None, raise_on_error: bool = True
                           ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets: every partition it committed (``partitions``
        None), or the ones asked for, None where the group has no offset."""
        return self._call(self._core.list_group_offsets(group_id, partitions, raise_on_error), timeout)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[Any, int | OffsetAndMetadata],
                            timeout: float | None = None, raise_on_error: bool = True
                            ) -> dict[TopicPartition, None]:
        """Commit these offsets for the group, as an outsider (generation -1, no member
        id, as Kafka's admin does).  The broker refuses while the group has members
        (UNKNOWN_MEMBER_ID or similar, per partition): stop its consumers first."""
        return self._call(self._core.alter_group_offsets(group_id, offsets, raise_on_error), timeout)

    def delete_group_offsets(self, group_id: str, partitions: Iterable[Any],
                             timeout: float | None = None, raise_on_error: bool = True
                             ) -> dict[TopicPartition, None]:
        """Forget the group's committed offsets of these partitions (OffsetDelete,
        KIP-496); a partition the group still consumes holds GroupSubscribedToTopicError."""
        return self._call(self._core.delete_group_offsets(group_id, partitions, raise_on_error), timeout)

    def group_lag(self, group_id: str, partitions: Iterable[Any] | None = None,
                  timeout: float | None = None) -> GroupLag:
        """Committed offset, end offset (ListOffsets latest) and their difference for
        every partition the group committed (or each of ``partitions``), and the sum of
        the lags; a partition without a committed offset has lag None."""
        return self._call(self._core.group_lag(group_id, partitions), timeout)

    # -- configs ---------------------------------------------------------------------------

    def describe_configs(self, resources: Iterable[Any], keys: Iterable[str] | None = None,
                         timeout: float | None = None, raise_on_error: bool = True
                         ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Configs of each resource (all of them, or only ``keys``), by name."""
        return self._call(self._core.describe_configs(resources, keys, raise_on_error), timeout)

    def alter_configs(self, changes: Mapping[Any, Mapping[str, str | None]], *,
                      validate_only: bool = False, timeout: float | None = None,
                      raise_on_error: bool = True) -> dict[ConfigResource, None]:
        """Set configs (a value) or reset them to their default (None), per resource;
        other configs of the resource are left as they are.

        Uses IncrementalAlterConfigs (KIP-339).  On a broker without it, falls back to
        AlterConfigs, which replaces the resource's whole dynamic config: the current
        dynamic configs are read first and sent along, and a resource with a sensitive
        one (its value cannot be read back) fails rather than lose it."""
        return self._call(self._core.alter_configs(changes, validate_only, raise_on_error), timeout)

    # -- SCRAM credentials (KIP-554) -------------------------------------------------------

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None,
                                        timeout: float | None = None, raise_on_error: bool = True
                                        ) -> dict[str, list[ScramCredentialInfo]]:
        """Each user's SCRAM credentials (mechanism and iterations, sorted by mechanism), by
        user name; every user that has one when ``users`` is None.  A named user without a credential fails
        with RESOURCE_NOT_FOUND (see the module docstring for ``raise_on_error``)."""
        return self._call(self._core.describe_user_scram_credentials(users, raise_on_error), timeout)

    def alter_user_scram_credentials(
        self, alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        timeout: float | None = None, raise_on_error: bool = True,
    ) -> dict[str, None]:
        """Create, replace or delete SCRAM credentials; returns None per user once all of
        that user's alterations are done, or the first one's error (the later ones of that
        user are then not sent).  One (user, mechanism) pair may appear once per call.

        The passwords are salted here, SASLprepped as kafkawire's own login preps them
        (see :func:`kafkawire.protocol.sasl.scram_credential`), and never sent.  A user name
        may hold any character Kafka stores, but Kafka's SCRAM login accepts ASCII user names
        only (its client-first message grammar), so a non-ASCII name cannot log in."""
        return self._call(self._core.alter_user_scram_credentials(alterations, raise_on_error), timeout)

    # -- ACLs (KIP-140) ----------------------------------------------------------------------

    def create_acls(self, bindings: Iterable[AclBinding], timeout: float | None = None,
                    raise_on_error: bool = True) -> dict[AclBinding, None]:
        """Create ACLs; None per binding once made (making one that exists is no error).
        The broker needs an authorizer (else SecurityDisabledError per binding)."""
        return self._call(self._core.create_acls(bindings, raise_on_error), timeout)

    def describe_acls(self, acl_filter: AclBindingFilter | None = None,
                      timeout: float | None = None) -> list[AclBinding]:
        """The ACLs that match ``acl_filter`` (default: every ACL), sorted by resource,
        then principal, host, operation and permission."""
        return self._call(self._core.describe_acls(acl_filter), timeout)

    def delete_acls(self, filters: Iterable[AclBindingFilter], timeout: float | None = None,
                    raise_on_error: bool = True) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete every ACL that matches each filter; returns, per filter, the ACLs it
        deleted (a binding matched by two filters is listed under each that deleted it)."""
        return self._call(self._core.delete_acls(filters, raise_on_error), timeout)

    # -- transactions (KIP-664) ----------------------------------------------------------------

    def list_transactions(self, *, states: Iterable[str] | None = None,
                          producer_ids: Iterable[int] | None = None, min_duration_ms: int | None = None,
                          timeout: float | None = None) -> dict[str, TransactionListing]:
        """Every transactional id the brokers coordinate, by id: only those in one of
        ``states`` (Kafka's names: Ongoing, PrepareCommit, CompleteAbort, ...), of one of
        ``producer_ids``, or open for at least ``min_duration_ms`` (ListTransactions v1,
        Kafka 3.8), when given."""
        return self._call(self._core.list_transactions(states, producer_ids, min_duration_ms), timeout)

    def describe_transactions(self, transactional_ids: Iterable[str], timeout: float | None = None,
                              raise_on_error: bool = True) -> dict[str, TransactionDescription]:
        """Each transactional id's state, producer, timeout and open partitions, from its
        coordinator; an unknown id holds TransactionalIdNotFoundError."""
        return self._call(self._core.describe_transactions(transactional_ids, raise_on_error), timeout)

    def describe_producers(self, partitions: Iterable[Any], timeout: float | None = None,
                           raise_on_error: bool = True) -> dict[TopicPartition, list[ProducerState]]:
        """The producers each partition's leader remembers (by producer id), with the
        offset where each one's open transaction began."""
        return self._call(self._core.describe_producers(partitions, raise_on_error), timeout)

    def abort_transaction(self, partition: Any, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, timeout: float | None = None) -> None:
        """Write an abort marker for ``producer_id``'s open transaction on ``partition``
        (WriteTxnMarkers to its leader), as Kafka's ``kafka-transactions abort`` does for a
        hanging transaction, one its coordinator no longer knows.  The producer's epoch and
        coordinator epoch come from :meth:`describe_producers`.  Needs ClusterAction on the
        cluster.  Raises the partition's error."""
        return self._call(self._core.abort_transaction(partition, producer_id, producer_epoch,
                                                       coordinator_epoch), timeout)

    # -- client quotas (KIP-546) ------------------------------------------------------------------

    def describe_client_quotas(self, match: Mapping[str, Any] | None = None, *, strict: bool = False,
                               timeout: float | None = None) -> dict[ClientQuotaEntity, dict[str, float]]:
        """The quotas (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
        ``controller_mutation_rate``, ``connection_creation_rate``) of each entity that
        matches: ``match`` maps an entity type ("user", "client-id", "ip") to a name, None
        for that type's default, or ClientQuotaEntity.ANY for any name; an entity with other
        types beside those matches too unless ``strict``.  No ``match``: every quota."""
        return self._call(self._core.describe_client_quotas(match, strict), timeout)

    def alter_client_quotas(self, changes: Mapping[Any, Mapping[str, float | None]], *,
                            validate_only: bool = False, timeout: float | None = None,
                            raise_on_error: bool = True) -> dict[ClientQuotaEntity, None]:
        """Set quotas (a value) or remove them (None), per ClientQuotaEntity; other quotas
        of the entity are left as they are."""
        return self._call(self._core.alter_client_quotas(changes, validate_only, raise_on_error), timeout)

    # -- partition reassignments and leader elections ----------------------------------------------

    def alter_partition_reassignments(self, changes: Mapping[Any, Iterable[int] | None],
                                      timeout: float | None = None, raise_on_error: bool = True
                                      ) -> dict[TopicPartition, None]:
        """Move each partition to the given replicas (the first is the preferred leader), or
        cancel its reassignment in progress (None).  Returns once the controller accepted
        it: the data moves afterwards (see :meth:`list_partition_reassignments`)."""
        return self._call(self._core.alter_partition_reassignments(changes, raise_on_error), timeout)

    def list_partition_reassignments(self, partitions: Iterable[Any] | None = None,
                                     timeout: float | None = None) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress (of ``partitions``, or all)."""
        return self._call(self._core.list_partition_reassignments(partitions), timeout)

    def elect_leaders(self, election_type: str = "preferred", partitions: Iterable[Any] | None = None,
                      timeout: float | None = None, raise_on_error: bool = True) -> dict[TopicPartition, None]:
        """Elect leaders: "preferred" (the first replica, when in sync) or "unclean" (any
        live replica, even one not in sync: may lose records), for ``partitions`` or every
        partition (then only those elected are listed).  A partition already led as asked
        holds ElectionNotNeededError."""
        return self._call(self._core.elect_leaders(election_type, partitions, raise_on_error), timeout)


    # -- share groups (KIP-932) ---------------------------------------------------------------

    def list_share_groups(self, timeout: float | None = None) -> dict[str, GroupListing]:
        """Every share group of the cluster (ListGroups to each broker, type "share")."""
        return self._call(share_admin.list_share_groups(self._core), timeout)

    def describe_share_groups(self, group_ids: Iterable[str], timeout: float | None = None,
                              raise_on_error: bool = True) -> dict[str, share_admin.ShareGroupDescription]:
        """State, epochs, assignor and members (their subscriptions and assignments) of each
        share group, from its coordinator (ShareGroupDescribe).  An unknown group comes back
        in state "Dead"."""
        return self._call(share_admin.describe_share_groups(self._core, group_ids, raise_on_error), timeout)

    def list_share_group_offsets(self, group_id: str, partitions: Iterable[Any] | None = None,
                                 timeout: float | None = None, raise_on_error: bool = True
                                 ) -> dict[TopicPartition, share_admin.ShareOffset | None]:
        """The share group's start offset (and lag) of every partition it reads
        (``partitions`` None), or of the ones asked for."""
        return self._call(share_admin.list_share_group_offsets(self._core, group_id, partitions, raise_on_error),
                          timeout)

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[Any, int], timeout: float | None = None,
                                  raise_on_error: bool = True) -> dict[TopicPartition, None]:
        """Set the share group's start offset per partition (the group must have no
        members: GroupNotEmptyError otherwise)."""
        return self._call(share_admin.alter_share_group_offsets(self._core, group_id, offsets, raise_on_error),
                          timeout)

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str], timeout: float | None = None,
                                   raise_on_error: bool = True) -> dict[str, None]:
        """Forget the share group's start offsets of these topics (the group must have no
        members reading them)."""
        return self._call(share_admin.delete_share_group_offsets(self._core, group_id, topics, raise_on_error),
                          timeout)

    # -- log directories --------------------------------------------------------------------------

    def describe_log_dirs(self, brokers: Iterable[int] | None = None, timeout: float | None = None,
                          raise_on_error: bool = True) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's (of ``brokers``, or all) log directories by path, with the replicas
        in each, their sizes and lags, and the directory's total and usable bytes."""
        return self._call(self._core.describe_log_dirs(brokers, raise_on_error), timeout)

    def alter_replica_log_dirs(self, moves: Mapping[Any, str], timeout: float | None = None,
                               raise_on_error: bool = True) -> dict[TopicPartitionReplica, None]:
        """Move replicas (TopicPartitionReplica or (topic, partition, broker id)) to another
        log directory of their broker.  Returns once the broker accepted: it copies the
        replica into a future one there and swaps them when it has caught up."""
        return self._call(self._core.alter_replica_log_dirs(moves, raise_on_error), timeout)

    # -- features ---------------------------------------------------------------------------------

    def describe_features(self, timeout: float | None = None) -> FeatureMetadata:
        """The features in force (``metadata.version``, ``transaction.version``,
        ``group.version``, ...) with their levels, and those the broker supports."""
        return self._call(self._core.describe_features(), timeout)

    def update_features(self, levels: Mapping[str, int], *, upgrade_type: str = "upgrade",
                        validate_only: bool = False, timeout: float | None = None,
                        raise_on_error: bool = True) -> dict[str, None]:
        """Set features' finalized levels: ``upgrade_type`` "upgrade", "safe_downgrade" or
        "unsafe_downgrade" (may lose metadata); level 0 turns a feature off.  Brokers of
        Kafka 4.0+ (UpdateFeatures v2) refuse or accept the request whole, so every
        feature then holds the same error."""
        return self._call(self._core.update_features(levels, upgrade_type, validate_only, raise_on_error), timeout)

    # -- topics a page at a time ------------------------------------------------------------------

    def describe_topic_partitions(self, topics: Iterable[str], *, page_size: int = 2000,
                                  timeout: float | None = None, raise_on_error: bool = True
                                  ) -> dict[str, TopicDescription]:
        """As :meth:`describe_topics`, from DescribeTopicPartitions (KIP-966, Kafka 3.8):
        the broker answers ``page_size`` partitions at a time, so a topic of many thousand
        partitions is not one huge answer, and each partition also carries its eligible
        leader replicas."""
        return self._call(self._core.describe_topic_partitions(topics, page_size, raise_on_error), timeout)
