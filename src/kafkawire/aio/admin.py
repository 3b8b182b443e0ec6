"""The asyncio admin client: :class:`kafkawire.Admin`'s calls, awaited.

::

    async with AsyncAdmin(bootstrap_servers="127.0.0.1:9092") as admin:
        await admin.create_topics([NewTopic("events", num_partitions=3)])
        (await admin.group_lag("billing")).total

Every call is a coroutine with :class:`~kafkawire.Admin`'s name, arguments, results and
typed errors (see :mod:`kafkawire.client.admin`), and returns by its ``timeout`` (seconds;
default ``request_timeout_ms``).  Both clients run the same requests and decisions
(:mod:`kafkawire.protocol.admin`); this one connects, sends and waits with asyncio.  Calls
may run concurrently on one client; they share its connections and the group
coordinators found.  As in Admin, an answer not in by a call's deadline closes its
connection (a broker answers in order: a held request would hold up the rest); other
calls waiting on it retry over a new one.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, Mapping

from kafkawire.aio.cluster import AsyncCluster
from kafkawire.core.config import Config, merge_options
from kafkawire.errors import ClientClosedError
from kafkawire.protocol.admin import *  # noqa: F403 - the result types, defined with the calls
from kafkawire.protocol.admin import AdminCore, Op
from kafkawire.protocol.fetcher import OffsetAndTimestamp
from kafkawire.protocol.steps import Request
from kafkawire.protocol import share_admin

__all__ = ["AsyncAdmin"]


def _now() -> float:
    return asyncio.get_running_loop().time()


class AsyncAdmin:
    """A Kafka admin client for asyncio.  Options are :class:`kafkawire.Admin`'s.

    ``await start()`` (or ``async with``) fetches the cluster's metadata; the first call
    does it otherwise.  ``await close()`` closes every connection.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **options: Any):
        self.config = c = Config.client(**merge_options("AsyncAdmin", config, options))
        self.cluster = AsyncCluster(c)
        self._core = AdminCore(c, self.cluster.meta)
        self._started = False
        self._closed = False

    async def start(self, timeout: float | None = None) -> None:
        """Fetch the cluster's metadata within ``timeout`` (default request_timeout_ms)."""
        self._check_open()
        if not self._started:
            await self.cluster.bootstrap(self._core.budget(timeout, _now()).timeout)
            self._started = True

    async def __aenter__(self) -> AsyncAdmin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection (idempotent)."""
        if not self._closed:
            self._closed = True
            await self.cluster.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the admin client is closed")
        self.cluster.check_fork()

    async def _call(self, op: Op, timeout: float | None) -> Any:
        """Run ``op`` to its end, by its deadline: connecting, sending and waiting for
        what its steps ask (a metadata refresh and the sleeps are the cluster's)."""
        self._check_open()
        budget = self._core.budget(timeout, _now())
        if not self._started:
            await self.start(max(0.001, budget.deadline - _now()))

        def prepare(step: Request, conn: Any) -> tuple[int, Any]:
            return self._core.prepare(op.name, step, conn.name, conn.protocol, budget.deadline, _now())

        return await self.cluster.run(op.steps(budget), budget.deadline, op.name, prepare=prepare,
                                      late=lambda step, conn: self._core.late(op.name, step.api, conn.name))

    # -- cluster and topics ------------------------------------------------------------

    async def describe_cluster(self, timeout: float | None = None, *, include_fenced_brokers: bool = False
                               ) -> ClusterDescription:
        """As :meth:`kafkawire.Admin.describe_cluster`."""
        return await self._call(self._core.describe_cluster(include_fenced_brokers), timeout)

    async def list_topics(self, timeout: float | None = None, include_internal: bool = False
                          ) -> dict[str, TopicDescription]:
        """As :meth:`kafkawire.Admin.list_topics`."""
        return await self._call(self._core.list_topics(include_internal), timeout)

    async def describe_topics(self, topics: Iterable[str], timeout: float | None = None,
                              raise_on_error: bool = True) -> dict[str, TopicDescription]:
        """As :meth:`kafkawire.Admin.describe_topics`."""
        return await self._call(self._core.describe_topics(topics, raise_on_error), timeout)

    async def create_topics(self, topics: Iterable[NewTopic | str], *, num_partitions: int = -1,
                            replication_factor: int = -1, configs: Mapping[str, str] | None = None,
                            validate_only: bool = False, timeout: float | None = None,
                            raise_on_error: bool = True) -> dict[str, CreatedTopic]:
        """As :meth:`kafkawire.Admin.create_topics`."""
        return await self._call(self._core.create_topics(topics, num_partitions, replication_factor, configs, validate_only,
                                                           raise_on_error), timeout)

    async def delete_topics(self, topics: Iterable[str], timeout: float | None = None,
                            raise_on_error: bool = True) -> dict[str, None]:
        """As :meth:`kafkawire.Admin.delete_topics`."""
        return await self._call(self._core.delete_topics(topics, raise_on_error), timeout)

    async def create_partitions(self, new_counts: Mapping[str, int], *, validate_only: bool = False,
                                timeout: float | None = None, raise_on_error: bool = True) -> dict[str, None]:
        """As :meth:`kafkawire.Admin.create_partitions`."""
        return await self._call(self._core.create_partitions(new_counts, validate_only, raise_on_error), timeout)

    # -- partitions: offsets and records -------------------------------------------------

    async def list_offsets(self, specs: Mapping[Any, str | int], *, read_committed: bool = False,
                           timeout: float | None = None, raise_on_error: bool = True
                           ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """As :meth:`kafkawire.Admin.list_offsets`."""
        return await self._call(self._core.list_offsets(specs, read_committed, raise_on_error), timeout)

    async def delete_records(self, before: Mapping[Any, int], timeout: float | None = None,
                             raise_on_error: bool = True) -> dict[TopicPartition, DeletedRecords]:
        """As :meth:`kafkawire.Admin.delete_records`."""
        return await self._call(self._core.delete_records(before, raise_on_error), timeout)

    # -- groups ----------------------------------------------------------------------------

    async def list_groups(self, timeout: float | None = None) -> dict[str, GroupListing]:
        """As :meth:`kafkawire.Admin.list_groups`."""
        return await self._call(self._core.list_groups(), timeout)

    async def describe_groups(self, group_ids: Iterable[str], timeout: float | None = None,
                              raise_on_error: bool = True) -> dict[str, GroupDescription]:
        """As :meth:`kafkawire.Admin.describe_groups`."""
        return await self._call(self._core.describe_groups(group_ids, raise_on_error), timeout)

    async def delete_groups(self, group_ids: Iterable[str], timeout: float | None = None,
                            raise_on_error: bool = True) -> dict[str, None]:
        """As :meth:`kafkawire.Admin.delete_groups`."""
        return await self._call(self._core.delete_groups(group_ids, raise_on_error), timeout)

    async def list_group_offsets(self, group_id: str, partitions: Iterable[Any] | None = None,
                                 timeout: float | None = None, raise_on_error: bool = True
                                 ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """As :meth:`kafkawire.Admin.list_group_offsets`."""
        return await self._call(self._core.list_group_offsets(group_id, partitions, raise_on_error), timeout)

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[Any, int | OffsetAndMetadata],
                                  timeout: float | None = None, raise_on_error: bool = True
                                  ) -> dict[TopicPartition, None]:
        """As :meth:`kafkawire.Admin.alter_group_offsets`."""
        return await self._call(self._core.alter_group_offsets(group_id, offsets, raise_on_error), timeout)

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[Any],
                                   timeout: float | None = None, raise_on_error: bool = True
                                   ) -> dict[TopicPartition, None]:
        """As :meth:`kafkawire.Admin.delete_group_offsets`."""
        return await self._call(self._core.delete_group_offsets(group_id, partitions, raise_on_error), timeout)

    async def group_lag(self, group_id: str, partitions: Iterable[Any] | None = None,
                        timeout: float | None = None) -> GroupLag:
        """As :meth:`kafkawire.Admin.group_lag`."""
        return await self._call(self._core.group_lag(group_id, partitions), timeout)

    # -- configs ---------------------------------------------------------------------------

    async def describe_configs(self, resources: Iterable[Any], keys: Iterable[str] | None = None,
                               timeout: float | None = None, raise_on_error: bool = True
                               ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """As :meth:`kafkawire.Admin.describe_configs`."""
        return await self._call(self._core.describe_configs(resources, keys, raise_on_error), timeout)

    async def alter_configs(self, changes: Mapping[Any, Mapping[str, str | None]], *,
                            validate_only: bool = False, timeout: float | None = None,
                            raise_on_error: bool = True) -> dict[ConfigResource, None]:
        """As :meth:`kafkawire.Admin.alter_configs`."""
        return await self._call(self._core.alter_configs(changes, validate_only, raise_on_error), timeout)

    # -- SCRAM credentials (KIP-554) -------------------------------------------------------

    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None,
                                              timeout: float | None = None, raise_on_error: bool = True
                                              ) -> dict[str, list[ScramCredentialInfo]]:
        """As :meth:`kafkawire.Admin.describe_user_scram_credentials`."""
        return await self._call(self._core.describe_user_scram_credentials(users, raise_on_error), timeout)

    async def alter_user_scram_credentials(
        self, alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        timeout: float | None = None, raise_on_error: bool = True,
    ) -> dict[str, None]:
        """As :meth:`kafkawire.Admin.alter_user_scram_credentials`."""
        return await self._call(self._core.alter_user_scram_credentials(alterations, raise_on_error), timeout)

    # -- ACLs (KIP-140) ----------------------------------------------------------------------

    async def create_acls(self, bindings: Iterable[AclBinding], timeout: float | None = None,
                          raise_on_error: bool = True) -> dict[AclBinding, None]:
        """As :meth:`kafkawire.Admin.create_acls`."""
        return await self._call(self._core.create_acls(bindings, raise_on_error), timeout)

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None,
                            timeout: float | None = None) -> list[AclBinding]:
        """As :meth:`kafkawire.Admin.describe_acls`."""
        return await self._call(self._core.describe_acls(acl_filter), timeout)

    async def delete_acls(self, filters: Iterable[AclBindingFilter], timeout: float | None = None,
                          raise_on_error: bool = True) -> dict[AclBindingFilter, list[AclBinding]]:
        """As :meth:`kafkawire.Admin.delete_acls`."""
        return await self._call(self._core.delete_acls(filters, raise_on_error), timeout)

    # -- transactions (KIP-664) ----------------------------------------------------------------

    async def list_transactions(self, *, states: Iterable[str] | None = None,
                                producer_ids: Iterable[int] | None = None, min_duration_ms: int | None = None,
                                timeout: float | None = None) -> dict[str, TransactionListing]:
        """As :meth:`kafkawire.Admin.list_transactions`."""
        return await self._call(self._core.list_transactions(states, producer_ids, min_duration_ms), timeout)

    async def describe_transactions(self, transactional_ids: Iterable[str], timeout: float | None = None,
                                    raise_on_error: bool = True) -> dict[str, TransactionDescription]:
        """As :meth:`kafkawire.Admin.describe_transactions`."""
        return await self._call(self._core.describe_transactions(transactional_ids, raise_on_error), timeout)

    async def describe_producers(self, partitions: Iterable[Any], timeout: float | None = None,
                                 raise_on_error: bool = True) -> dict[TopicPartition, list[ProducerState]]:
        """As :meth:`kafkawire.Admin.describe_producers`."""
        return await self._call(self._core.describe_producers(partitions, raise_on_error), timeout)

    async def abort_transaction(self, partition: Any, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int, timeout: float | None = None) -> None:
        """As :meth:`kafkawire.Admin.abort_transaction`."""
        return await self._call(self._core.abort_transaction(partition, producer_id, producer_epoch,
                                                             coordinator_epoch), timeout)

    # -- client quotas (KIP-546) ------------------------------------------------------------------

    async def describe_client_quotas(self, match: Mapping[str, Any] | None = None, *, strict: bool = False,
                                     timeout: float | None = None) -> dict[ClientQuotaEntity, dict[str, float]]:
        """As :meth:`kafkawire.Admin.describe_client_quotas`."""
        return await self._call(self._core.describe_client_quotas(match, strict), timeout)

    async def alter_client_quotas(self, changes: Mapping[Any, Mapping[str, float | None]], *,
                                  validate_only: bool = False, timeout: float | None = None,
                                  raise_on_error: bool = True) -> dict[ClientQuotaEntity, None]:
        """As :meth:`kafkawire.Admin.alter_client_quotas`."""
        return await self._call(self._core.alter_client_quotas(changes, validate_only, raise_on_error), timeout)

    # -- partition reassignments and leader elections ----------------------------------------------

    async def alter_partition_reassignments(self, changes: Mapping[Any, Iterable[int] | None],
                                            timeout: float | None = None, raise_on_error: bool = True
                                            ) -> dict[TopicPartition, None]:
        """As :meth:`kafkawire.Admin.alter_partition_reassignments`."""
        return await self._call(self._core.alter_partition_reassignments(changes, raise_on_error), timeout)

    async def list_partition_reassignments(self, partitions: Iterable[Any] | None = None,
                                           timeout: float | None = None
                                           ) -> dict[TopicPartition, PartitionReassignment]:
        """As :meth:`kafkawire.Admin.list_partition_reassignments`."""
        return await self._call(self._core.list_partition_reassignments(partitions), timeout)

    async def elect_leaders(self, election_type: str = "preferred", partitions: Iterable[Any] | None = None,
                            timeout: float | None = None, raise_on_error: bool = True
                            ) -> dict[TopicPartition, None]:
        """As :meth:`kafkawire.Admin.elect_leaders`."""
        return await self._call(self._core.elect_leaders(election_type, partitions, raise_on_error), timeout)


    # -- share groups (KIP-932) ---------------------------------------------------------------

    async def list_share_groups(self, timeout: float | None = None) -> dict[str, GroupListing]:
        """As :meth:`kafkawire.Admin.list_share_groups`."""
        return await self._call(share_admin.list_share_groups(self._core), timeout)

    async def describe_share_groups(self, group_ids: Iterable[str], timeout: float | None = None,
                                    raise_on_error: bool = True) -> dict[str, share_admin.ShareGroupDescription]:
        """As :meth:`kafkawire.Admin.describe_share_groups`."""
        return await self._call(share_admin.describe_share_groups(self._core, group_ids, raise_on_error), timeout)

    async def list_share_group_offsets(self, group_id: str, partitions: Iterable[Any] | None = None,
                                       timeout: float | None = None, raise_on_error: bool = True
                                       ) -> dict[TopicPartition, share_admin.ShareOffset | None]:
        """As :meth:`kafkawire.Admin.list_share_group_offsets`."""
        return await self._call(
            share_admin.list_share_group_offsets(self._core, group_id, partitions, raise_on_error), timeout)

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[Any, int],
                                        timeout: float | None = None, raise_on_error: bool = True
                                        ) -> dict[TopicPartition, None]:
        """As :meth:`kafkawire.Admin.alter_share_group_offsets`."""
        return await self._call(
            share_admin.alter_share_group_offsets(self._core, group_id, offsets, raise_on_error), timeout)

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str], timeout: float | None = None,
                                         raise_on_error: bool = True) -> dict[str, None]:
        """As :meth:`kafkawire.Admin.delete_share_group_offsets`."""
        return await self._call(
            share_admin.delete_share_group_offsets(self._core, group_id, topics, raise_on_error), timeout)

    # -- log directories --------------------------------------------------------------------------

    async def describe_log_dirs(self, brokers: Iterable[int] | None = None, timeout: float | None = None,
                                raise_on_error: bool = True) -> dict[int, dict[str, LogDirDescription]]:
        """As :meth:`kafkawire.Admin.describe_log_dirs`."""
        return await self._call(self._core.describe_log_dirs(brokers, raise_on_error), timeout)

    async def alter_replica_log_dirs(self, moves: Mapping[Any, str], timeout: float | None = None,
                                     raise_on_error: bool = True) -> dict[TopicPartitionReplica, None]:
        """As :meth:`kafkawire.Admin.alter_replica_log_dirs`."""
        return await self._call(self._core.alter_replica_log_dirs(moves, raise_on_error), timeout)

    # -- features ---------------------------------------------------------------------------------

    async def describe_features(self, timeout: float | None = None) -> FeatureMetadata:
        """As :meth:`kafkawire.Admin.describe_features`."""
        return await self._call(self._core.describe_features(), timeout)

    async def update_features(self, levels: Mapping[str, int], *, upgrade_type: str = "upgrade",
                              validate_only: bool = False, timeout: float | None = None,
                              raise_on_error: bool = True) -> dict[str, None]:
        """As :meth:`kafkawire.Admin.update_features`."""
        return await self._call(self._core.update_features(levels, upgrade_type, validate_only, raise_on_error),
                                timeout)

    # -- topics a page at a time ------------------------------------------------------------------

    async def describe_topic_partitions(self, topics: Iterable[str], *, page_size: int = 2000,
                                        timeout: float | None = None, raise_on_error: bool = True
                                        ) -> dict[str, TopicDescription]:
        """As :meth:`kafkawire.Admin.describe_topic_partitions`."""
        return await self._call(self._core.describe_topic_partitions(topics, page_size, raise_on_error), timeout)
