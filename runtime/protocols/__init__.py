"""The instant-coordination protocols, one module each, behind :mod:`runtime.protocols.base`.

Adding a protocol is a new module with a :class:`~runtime.protocols.base.Protocol` subclass and
one line in :data:`PROTOCOLS`; a protocol outside the project is named by a spec (a file, a module,
an entry point) that :mod:`runtime.protocols.loading` resolves (docs/PROTOCOL_API.md).
"""

from __future__ import annotations

from functools import cache

from runtime.protocols.base import Protocol
from runtime.protocols.ckp_meta import CkpMetaProtocol
from runtime.protocols.control_topic import ControlTopicProtocol
from runtime.protocols.coordination_rpc import AsyncCoordinationRpcProtocol, CoordinationRpcProtocol
from runtime.protocols.loading import load_protocol
from runtime.protocols.message_bus import MessageBusProtocol
from runtime.protocols.operator_event import OperatorEventProtocol
from runtime.protocols.timeline_server import TimelineServerProtocol
from runtime.protocols.two_phase_commit import TwoPhaseCommitProtocol

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
        TwoPhaseCommitProtocol,  # a what-if, not a Hudi release
    )
}


@cache
def get_protocol(spec: str) -> type[Protocol]:
    """The protocol a registered name or a spec (``path/to/file.py[:Class]``, ``pkg.mod[:Class]``,
    an entry point of ``commitlab.protocols``) names; raises ProtocolSpecError (a UserError)."""
    return load_protocol(spec, PROTOCOLS)


def protocol_name(spec: str) -> str:
    """What results and tables call the protocol ``spec`` names: its class's ``name``."""
    return get_protocol(spec).name
