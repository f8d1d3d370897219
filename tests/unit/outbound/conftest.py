"""Every test here runs on both event loops the dispatcher can send on (``event_loop`` setting):
uvloop and asyncio's own. ``asyncio.run`` takes its loop from the policy set here."""

from tests.unit.loops import on_each_loop as on_each_loop  # autouse
from tests.unit.senders import on_each_client as on_each_client  # autouse
