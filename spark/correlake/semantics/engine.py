"""The correlation engine: one sequential pass over the records of one partition.

Pure Python, no Spark. A partition holds every record of a set of
`(tenant_id, correlation_key)` pairs that can influence each other (a key group, see
`transforms/key_groups.py`), sorted in the total order of `order.py` (rules 2-3).
`correlate_partition` replays them and returns the gold rows.

The state is split by what the rules name (`buffer`, `subscriptions`, `start_events`,
`correlations`); each record kind has a handler here that takes only the state it needs.
Input records are dicts with `kind` (an `order` kind), the time `t` in epoch millis,
`position` and `group_position` (for an open: the lowest position of its rule-3 group).
Deployments are given per tenant, sorted by `(t, position)`, and merged into the order here.
"""

from __future__ import annotations

from typing import Callable

from correlake.semantics import order
from correlake.semantics.buffer import Message, MessageBuffer
from correlake.semantics.correlations import Correlations
from correlake.semantics.start_events import Deployments, MessageStarts, StartedInstances, StartLocks
from correlake.semantics.subscriptions import Catch, Scopes, Subscriptions


class MessagePublishedHandler:
    """Rule 17: an accepted message goes to the first-opened subscription of each process,
    then starts instances of the others (rule 19); the non-interrupting takers pull."""

    def __init__(self, buffer: MessageBuffer, subscriptions: Subscriptions, deployments: Deployments,
                 catch: Catch, starts: MessageStarts):
        self.buffer, self.subscriptions, self.deployments = buffer, subscriptions, deployments
        self.catch, self.starts = catch, starts

    def handle(self, record: dict) -> None:
        m = Message.of(record)
        if not m.accepted:  # rule 7: a rejected duplicate does nothing
            return
        t = m.t
        self.buffer.add(m)
        took = []
        for sub in self.subscriptions.first_opened(m.name, m.key):
            self.catch.correlate(sub, m, t)
            if not sub.interrupting:
                took.append(sub)
        for process in self.deployments.processes_starting(m.name):
            if process not in m.processes:
                self.starts.try_start(process, m, t)
        for sub in took:
            self.catch.pull(sub, t)


class SubscriptionsOpenedHandler:
    """Rule 3: a group of opens is handled at once: every member opens (rules 10-11), then
    each one still open pulls (rule 14), in position order."""

    def __init__(self, subscriptions: Subscriptions, catch: Catch):
        self.subscriptions, self.catch = subscriptions, catch

    def handle(self, group: list[dict]) -> None:
        opened = [sub for sub in map(self.subscriptions.open, group) if sub is not None]
        for sub in opened:
            if sub.is_open:
                self.catch.pull(sub, sub.row["opened_at"])


class ElementLeftHandler:
    """Rule 11: the element instance is left; its subscriptions close."""

    def __init__(self, subscriptions: Subscriptions):
        self.subscriptions = subscriptions

    def handle(self, record: dict) -> None:
        self.subscriptions.element_left(record["element_instance_key"], record["t"])


class InstanceEndedHandler:
    """Rules 11, 20a, 21: the first end of a process instance closes its subscriptions and
    releases its lock; the end of a message-started instance not started yet is held."""

    def __init__(self, scopes: Scopes, instances: StartedInstances, end_instance: Callable[[str, int], None]):
        self.scopes, self.instances, self.end_instance = scopes, instances, end_instance

    def handle(self, record: dict) -> None:
        key = record["process_instance_key"]
        if not self.scopes.first_end(key):
            return
        if self.instances.not_started_yet(key):
            self.instances.hold_end(key)
            return
        self.end_instance(key, record["t"])


class ProcessDeployedHandler:
    """Rule 18: the deployment becomes its process's current one."""

    def __init__(self, deployments: Deployments):
        self.deployments = deployments

    def handle(self, record: dict) -> None:
        self.deployments.deploy(record["bpmn_process_id"], record["process_version"],
                                record["message_start_events"] or ())


class Engine:
    """The state of one partition's pass and the handlers over it."""

    def __init__(self, tenant_id: str):
        self.buffer = MessageBuffer()
        self.scopes = Scopes()
        self.subscriptions = Subscriptions(self.scopes)
        self.deployments = Deployments()
        self.instances = StartedInstances()
        self.correlations = Correlations(tenant_id)
        catch = Catch(self.subscriptions, self.buffer, self.correlations)
        self.starts = MessageStarts(tenant_id, self.deployments, StartLocks(), self.instances, self.buffer,
                                    self.correlations, self.end_instance)
        self.published = MessagePublishedHandler(self.buffer, self.subscriptions, self.deployments, catch,
                                                 self.starts)
        self.opened = SubscriptionsOpenedHandler(self.subscriptions, catch)
        self.handlers = {
            order.ELEMENT_LEFT: ElementLeftHandler(self.subscriptions).handle,
            order.INSTANCE_ENDED: InstanceEndedHandler(self.scopes, self.instances, self.end_instance).handle,
            order.MESSAGE_PUBLISHED: self.published.handle,
        }
        self.deployed = ProcessDeployedHandler(self.deployments)

    def end_instance(self, instance_key: str, t: int) -> None:
        """A process instance's end taking effect at `t` (rules 11, 21)."""
        self.subscriptions.instance_ended(instance_key, t)
        self.starts.instance_ended(instance_key, t)

    def run(self, records, deployments: list[dict]) -> None:
        """Handle `records` (sorted) with `deployments` merged in; opens by rule-3 group."""
        pending = [(order.deployment_sort_key(d), d) for d in deployments]
        pending.reverse()  # the next one last
        group: list[dict] = []
        for record in records:
            if pending:
                key = order.record_sort_key(record)
                while pending and pending[-1][0] < key:
                    if group:
                        self._open(group)
                    self.deployed.handle(pending.pop()[1])
            if record["kind"] == order.SUBSCRIPTION_OPENED:
                if group and group[0][order.GROUP_POSITION] != record[order.GROUP_POSITION]:
                    self._open(group)
                group.append(record)
                continue
            if group:
                self._open(group)
            self.handlers[record["kind"]](record)
        if group:
            self._open(group)

    def _open(self, group: list[dict]) -> None:
        self.opened.handle(group)
        group.clear()


def correlate_partition(tenant_id: str, events, deployments: list[dict]) -> dict[str, list[dict]]:
    """Replay one partition's sorted events; return gold rows by table.

    `deployments`: this tenant's PROCESS_DEPLOYED records (keys t, position,
    bpmn_process_id, process_version, message_start_events), sorted by `order.deployment_sort_key`.
    """
    engine = Engine(tenant_id)
    engine.run(events, deployments)
    return {
        "correlations": engine.correlations.rows,
        "subscriptions": engine.subscriptions.rows(),
        "message_started_instances": engine.instances.rows(),
    }
