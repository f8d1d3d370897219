"""The ``Deliverer`` port: everything Horae does differently per target kind, in one object per
kind, so that no module outside :mod:`horae.delivery` asks which kind a target is.

A new kind is one module implementing :class:`Deliverer` plus one row of
:data:`horae.delivery.table.DELIVERERS` (and, on the wire, one ``TargetKind`` symbol: readers from
contracts v5 on read a symbol they do not know as ``event``, see docs/contracts.md). What the
rest of Horae asks, and who asks it:

- **validation at ingress** (:func:`horae.contracts.ingress.validate_definition`):
  :meth:`Deliverer.validate` refuses a target its kind cannot deliver to;
- **ownership and secrets** (:meth:`horae.contracts.grants.Grants.check_secret_refs`):
  :attr:`Deliverer.signed` — a signed kind needs at least one secret ref, each owned by the
  trigger's tenant; an unsigned kind's refs are not checked;
- **SSRF policy** (the API's ``check_target``, then its host verification):
  :meth:`Deliverer.egress_url` — the URL a call leaves Horae for, or ``None`` for a kind that
  makes no outbound call; the dispatcher's sender applies the same policy again when it sends;
- **the hand-over and the body** (the planner's :func:`horae.streams.planner.records.fire_outputs`,
  the router's topics): :attr:`Deliverer.hand_over` — ``DISPATCH``: a
  :class:`~horae.contracts.events.DispatchOrder` on a lane, its body built and sent by the
  dispatcher's sender (signed, retried, an outcome reported later: the fire is *in flight* until
  then, so the overlap policy applies); ``TOPIC``: the ``schedule.triggered`` event written by the
  planner to :meth:`horae.contracts.routing.Router.target_topic` in the fire record's own
  transaction (the event *is* the delivery: done at commit, nothing in flight, overlap moot);
- **the call** (the dispatcher's sender, :func:`horae.streams.dispatcher.deliver.attempt_once`):
  :meth:`Deliverer.call` — what one attempt of a ``DISPATCH`` order sends (URL, method, body and
  its content type, timeout), or why it cannot be sent (:class:`NotCalled`); the dispatcher adds
  the tenant's headers and its own (the fire key, the signatures, the callback token), signs with
  the tenant's secrets and sends through its pinned, SSRF-checked sender. A ``DISPATCH`` kind is
  ``signed``: nothing unsigned leaves the dispatcher;
- **one line for people** (the CLI's listings, the console's): :meth:`Deliverer.describe` over
  the target's JSON form, as the API returns it;
- **the console's choice of kind** (its create and edit forms): :attr:`Deliverer.label`, and
  :meth:`Deliverer.form`, the target's JSON form from the form's flat fields.

Contract every implementation keeps: pure (no I/O, no clock, no settings read: values in, values
out), safe to call from any thread and as often as asked (the planner asks per fire), and
:meth:`validate` raises only :class:`~horae.domain.errors.ValidationError` naming a ``target.``
field. Anchor: APScheduler 4's ``abc.JobExecutor`` and its one-module executors.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Final

from horae.contracts import events as ev

#: ``Attempt.not_sent`` of an order that cannot be sent at all, the same way on every attempt (a
#: plain Avro string beside :class:`~horae.contracts.events.NotSent`'s values)
UNSENDABLE: Final = "unsendable"


class HandOver(StrEnum):
    """How a fired instant leaves the planner (the two mechanisms the planner knows)."""

    DISPATCH = "dispatch"  # a DispatchOrder on a lane; the dispatcher's sender delivers it
    TOPIC = "topic"  # a schedule.triggered event into the target topic, in the fire's transaction


@dataclass(frozen=True, slots=True)
class Call:
    """What one attempt of a dispatched order sends, before the dispatcher's own headers."""

    url: str
    body: bytes
    content_type: str | None  # ``None``: no ``Content-Type`` header
    method: str
    timeout_s: float


@dataclass(frozen=True, slots=True)
class NotCalled:
    """Why an attempt is not made: ``not_sent`` is a :class:`~horae.contracts.events.NotSent`
    value or :data:`UNSENDABLE`; ``cause`` says it for people (the attempt record, the logs)."""

    not_sent: str
    cause: str


class Deliverer(ABC):
    """The rules of one target kind (see the module docstring for who asks what)."""

    #: the wire symbol of the kind (the key of its row in the table)
    kind: ClassVar[ev.TargetKind]
    #: how a fire of this kind is handed over; ``DISPATCH`` fires stay in flight until an outcome
    hand_over: ClassVar[HandOver]
    #: whether a target of this kind is signed with its tenant's secrets (``secret_refs``)
    signed: ClassVar[bool]
    #: the kind for people choosing it (the console's create form)
    label: ClassVar[str]

    @property
    def in_flight(self) -> bool:
        """A fire runs after its decision and reports an outcome (the overlap policy applies)."""
        return self.hand_over is HandOver.DISPATCH

    @abstractmethod
    def validate(self, tenant: str, target: ev.Target) -> None:
        """Refuse (``ValidationError`` on a ``target.`` field) a target of tenant ``tenant`` this
        kind cannot deliver to; return ``None`` when it can. The checks common to every kind
        (timeout, body form, headers) are ingress's own."""

    @abstractmethod
    def egress_url(self, target: ev.Target) -> str | None:
        """The URL a delivery calls (the SSRF policy and host verification check it), or
        ``None``: this kind makes no outbound call."""

    @abstractmethod
    def describe(self, target: Mapping[str, Any]) -> str:
        """The target in one line (its JSON form), e.g. ``POST https://...``."""

    def call(self, order: ev.DispatchOrder) -> Call | NotCalled:
        """What attempt ``order.attempt`` sends (a ``DISPATCH`` kind says; the same order gives
        the same call on every attempt but for what the attempt number changes), or why it is
        not sent. A kind that is not dispatched is not sent by the dispatcher: an order of it
        (a newer planner's kind read as this one) is :data:`UNSENDABLE`."""
        cause = (
            f"unsendable: target kind {self.kind} is not dispatched (hand-over {self.hand_over})"
        )
        return NotCalled(UNSENDABLE, cause)

    @abstractmethod
    def form(self, fields: Mapping[str, str], tenant: str) -> dict[str, Any]:
        """The target's JSON form (as the API takes it) from flat text ``fields`` (the console's
        form: ``topic``, ``url``, ``secret_ref``; absent or empty ones keep the API's defaults),
        for a trigger of ``tenant``."""
