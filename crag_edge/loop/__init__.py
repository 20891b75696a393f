"""The corrective loop: a question's request and state machine (`state`), the order of its moves
(`machine.CragLoop`) and the work of each stage (`stages`)."""

from crag_edge.loop.machine import CragLoop
from crag_edge.loop.stages import Stages
from crag_edge.loop.state import Event, Phase, Request, StopReason

__all__ = ["CragLoop", "Event", "Phase", "Request", "Stages", "StopReason"]
