"""Faults a test or ``kafka-sim ctl`` injects into a running :class:`~kafka_sim.server.SimulatedCluster`.

Each command runs on the cluster's event loop (``_call``), so the model and the listeners change
together, as a broker's death or stall does.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from kafka_sim.model import ClusterModel
    from kafka_sim.server import ClusterRuntime


class BrokerFaults:
    """Broker deaths, stalls, slow networks and write-rate changes (mixed into SimulatedCluster)."""

    model: ClusterModel
    host: str
    _runtime: ClusterRuntime

    if TYPE_CHECKING:  # SimulatedCluster's own: run on its loop, wake its waiters
        def _call(self, coro: Any, timeout: float = 30) -> Any: ...

        def _notify(self) -> None: ...

    def answers(self, broker_id: int) -> bool:
        """Whether a request to this broker is answered now: it is registered, running and not frozen.

        :param broker_id: broker id
        """
        broker = self.model.brokers.get(broker_id)
        return broker is not None and broker.alive and broker_id not in self._runtime.frozen

    def stop_broker(self, broker_id: int) -> None:
        """Kill a broker: its listener closes (connections refused), replicas go offline.

        :param broker_id: broker id
        """
        if broker_id not in self.model.brokers:
            raise KeyError(f"unknown broker {broker_id}")

        async def go() -> None:
            await self._runtime.close_listener(broker_id)
            self.model.stop_broker(broker_id)
            self._runtime.notify()

        self._call(go())

    def start_broker(self, broker_id: int) -> None:
        """Restart a stopped broker on its previous port; it catches up and rejoins the ISR.

        :param broker_id: broker id
        """
        if broker_id not in self.model.brokers:
            raise KeyError(f"unknown broker {broker_id}")

        async def go() -> None:
            port = self._runtime.endpoints.get(broker_id, (self.host, 0))[1]
            self.model.start_broker(broker_id)
            await self._runtime.open_listener(broker_id, port)
            self._runtime.notify()

        self._call(go())

    def freeze_broker(self, broker_id: int, api_keys: Iterable[int] | None = None) -> None:
        """Make a broker stop answering while its connections stay open (a broker stuck in a
        long GC pause or on a hung disk): requests are read and held until :meth:`thaw_broker`.

        :param broker_id: broker id
        :param api_keys: only requests of these API keys stall (None: every request)
        """
        if broker_id not in self.model.brokers:
            raise KeyError(f"unknown broker {broker_id}")
        keys = frozenset(api_keys) if api_keys is not None else None

        async def go() -> None:
            self._runtime.frozen[broker_id] = (keys, asyncio.Event())

        self._call(go())

    def thaw_broker(self, broker_id: int) -> None:
        """Answer a frozen broker's held requests and every later one.

        :param broker_id: broker id
        """
        async def go() -> None:
            frozen = self._runtime.frozen.pop(broker_id, None)
            if frozen is not None:
                frozen[1].set()

        self._call(go())

    def set_network(self, broker_id: int, bytes_per_sec: float) -> None:
        """Degrade (or restore) a broker's network capacity; followers it cannot carry fall behind.

        :param broker_id: broker id
        :param bytes_per_sec: capacity in each direction
        """
        if broker_id not in self.model.brokers:
            raise KeyError(f"unknown broker {broker_id}")
        self.model.set_network(broker_id, bytes_per_sec)
        self._notify()

    def set_write_rate(self, topic: str, partition: int, bytes_per_sec: float) -> None:
        """Change how fast producers write to a partition (simulated traffic, not records).

        :param topic: topic name
        :param partition: partition index
        :param bytes_per_sec: the new write rate
        """
        self.model.set_write_rate(topic, partition, bytes_per_sec)
        self._notify()
