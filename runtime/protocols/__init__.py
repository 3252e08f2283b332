"""The instant-coordination protocols, one module each, behind :mod:`runtime.protocols.base`.

Adding a protocol is a new module with a :class:`~runtime.protocols.base.Protocol` subclass and
one line in :data:`PROTOCOLS`.
"""

from __future__ import annotations

from runtime.protocols.base import Protocol
from runtime.protocols.ckp_meta import CkpMetaProtocol
from runtime.protocols.control_topic import ControlTopicProtocol
from runtime.protocols.coordination_rpc import AsyncCoordinationRpcProtocol, CoordinationRpcProtocol
from runtime.protocols.message_bus import MessageBusProtocol
from runtime.protocols.operator_event import OperatorEventProtocol
from runtime.protocols.timeline_server import TimelineServerProtocol

PROTOCOLS: dict[str, type[Protocol]] = {
    p.name: p
    for p in (
        OperatorEventProtocol,
        MessageBusProtocol,
        CkpMetaProtocol,
        TimelineServerProtocol,
        CoordinationRpcProtocol,
        AsyncCoordinationRpcProtocol,
        ControlTopicProtocol,
    )
}


def get_protocol(name: str) -> type[Protocol]:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; choose one of {', '.join(PROTOCOLS)}") from None
