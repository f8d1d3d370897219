"""The event contracts of Horae as Python types: one frozen dataclass per Avro record.

Each top-level event ``X`` has the schema ``horae/contracts/schemas/X.avsc`` (namespace
``horae.events``); the test ``tests/unit/contracts/test_mirror.py`` proves both agree field for
field. Conventions:

- every instant is an aware UTC ``datetime`` (Avro ``long``/``timestamp-micros``);
- enums are ``StrEnum`` whose values are the Avro symbols; ``Origin`` is the fire key's own
  (:class:`horae.domain.keys.Origin`), one definition for the key and the wire;
- optional fields are ``X | None`` (Avro ``["null", X]``, default null); collections are tuples
  (arrays) and mappings (maps), default empty;
- a field added later must carry a default (BACKWARD compatibility, checked in CI);
- every record class is ``@event`` over ``@dataclass(frozen=True, slots=True)``: the same
  ``__init__``, about twice as fast (:mod:`horae.contracts._fast_init`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum, StrEnum

from horae.contracts._fast_init import event
from horae.domain.keys import Origin as Origin


class DefinitionState(StrEnum):
    LIVE = "live"
    PAUSED = "paused"
    DELETED = "deleted"


class RecurrenceKind(StrEnum):
    CRON = "cron"
    EVERY = "every"
    AT = "at"


class DstGap(StrEnum):
    SHIFT = "shift"
    SKIP = "skip"


class DstRepeat(StrEnum):
    FIRST = "first"
    BOTH = "both"


class Misfire(StrEnum):
    FIRE_ONCE = "fire_once"
    FIRE_ALL = "fire_all"
    SKIP = "skip"


class Overlap(StrEnum):
    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    REPLACE = "replace"


class ActionAfterCompletion(StrEnum):
    """What the planner does with a definition once its last instant is decided (since v7;
    EventBridge Scheduler's ``ActionAfterCompletion``)."""

    NONE = "none"  # kept, shown completed
    DELETE = "delete"  # a deleted version follows, written by the planner (audited)


class TargetKind(StrEnum):
    WEBHOOK = "webhook"
    EVENT = "event"


class Role(StrEnum):
    AUTHOR = "author"
    POLICY = "policy"
    READ = "read"
    PLATFORM = "platform"


class Lane(StrEnum):
    ON_TIME = "on_time"
    CATCH_UP = "catch_up"
    BACKFILL = "backfill"
    MANUAL = "manual"
    RETRY = "retry"


class FireState(StrEnum):
    """The decision about one instant; who writes each value: docs/contracts.md ("Who produces
    each value"). Reserved symbols are written by no path and stay only because an Avro enum
    symbol cannot be removed compatibly (a reader would fail on old records holding it)."""

    FIRED = "fired"  # committed and handed over (an order on a lane, or an event target's event)
    SKIPPED = "skipped"  # decided not to dispatch (misfire skip, overlap skip)
    EXPIRED = "expired"  # older than the catch-up horizon
    PAUSED = "paused"  # due while its tenant was suspended (cause "tenant suspended")
    REJECTED = "rejected"  # reserved: never written (a refused act is quarantined and audited)
    SHED = "shed"  # reserved: never written (the dispatcher defers shed work, never drops it)
    REPLACED = "replaced"  # cancelled by a newer fire (overlap replace)


class CommandKind(StrEnum):
    MANUAL_RUN = "manual_run"
    BACKFILL = "backfill"
    PAUSE = "pause"
    RESUME = "resume"


class TransportResult(StrEnum):
    """How an attempt ended on the wire (the dispatcher maps its sender's results onto these)."""

    OK = "ok"  # 2xx
    HTTP_ERROR = "http_error"  # a non-2xx answer (see http_status)
    TIMEOUT = "timeout"
    CONNECT_ERROR = "connect_error"
    TLS_ERROR = "tls_error"
    REFUSED_ADDRESS = "refused_address"  # SSRF guard: non-public address; or never sent (not_sent)
    PRODUCE_ERROR = "produce_error"  # reserved: never written (event targets make no attempt)
    UNKNOWN = "unknown"  # outcome unknown (e.g. crash mid-call)


class NotSent(StrEnum):
    """Values of :attr:`Attempt.not_sent` (a plain Avro string): why an attempt never ran.
    ``transport_result`` is then ``refused_address`` for readers that predate the field."""

    NO_SECRET = "no_secret"  # none of the target's secret_refs is configured for its tenant
    NO_URL = "no_url"  # a webhook target without a URL
    NO_OIDC_KEY = "no_oidc_key"  # target.oidc set, but this dispatcher holds no OIDC signing key


class OutcomeSource(StrEnum):
    """Values of :attr:`WorkOutcome.source` (a plain Avro string): who reported the outcome."""

    DISPATCHER = "dispatcher"  # the dispatcher's own verdict on its attempts
    CALLBACK = "callback"  # the target, through its attempt's callback token


class OutcomeState(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # permanent failure (e.g. 4xx other than 408/429)
    EXHAUSTED = "exhausted"  # attempt budget or deadline used up
    CANCELLED = "cancelled"  # replaced (overlap) while held, or cancelled by its tenant (v9)


class ScheduleEventType(StrEnum):
    """Values of :attr:`ScheduleEvent.type` (a plain Avro string, so new types never break an
    old subscriber)."""

    TRIGGERED = "schedule.triggered"
    SKIPPED = "schedule.skipped"
    EXPIRED = "schedule.expired"
    PAUSED = "schedule.paused"
    RESUMED = "schedule.resumed"
    SUCCEEDED = "schedule.succeeded"
    FAILED = "schedule.failed"
    REJECTED = "schedule.rejected"
    COMPLETED = "schedule.completed"  # no instant left (past its end, or its last ``at``)
    RECOMPUTED = "schedule.recomputed"  # a new tzdata release moved the next instant
    REPLACED = "schedule.replaced"  # a fire replaced by a newer one (overlap ``replace``)


#: Each enum's Avro ``default`` (since v5): the symbol a reader decodes a symbol it does not know
#: as (Avro schema resolution), so a later release may add a symbol without breaking the readers
#: deployed from v5 on. Each is the fallback whose mistake is the safest: it never calls out,
#: fires, grants or claims more than the record's writer meant (reasons: docs/contracts.md,
#: "Enum defaults"). A new enum needs an entry here (``schema_of`` refuses one without).
ENUM_DEFAULTS: Mapping[type[Enum], StrEnum] = {
    DefinitionState: DefinitionState.PAUSED,  # kept, never fired, resumable; not dropped
    RecurrenceKind: RecurrenceKind.AT,  # fires only at the listed instants: a new kind lists none
    DstGap: DstGap.SHIFT,  # the field's default: the fire is kept, an hour later
    DstRepeat: DstRepeat.FIRST,  # the field's default: once, never twice
    Misfire: Misfire.FIRE_ONCE,  # the field's default: neither a flood nor a silent drop
    ActionAfterCompletion: ActionAfterCompletion.NONE,  # the field's default: nothing deleted
    Overlap: Overlap.BUFFER_ONE,  # never two at once, and the latest fire is kept
    TargetKind: TargetKind.EVENT,  # no outbound call: the fire goes to the tenant's own topic
    Role: Role.READ,  # least privilege
    Lane: Lane.BACKFILL,  # the lowest tier: delivered, never ahead of on-time work
    FireState: FireState.SKIPPED,  # decided (never decided again), claims no hand-over
    CommandKind: CommandKind.PAUSE,  # its mistake is silence, reversible; never a fire
    TransportResult: TransportResult.UNKNOWN,  # literally: this reader cannot tell
    OutcomeState: OutcomeState.EXHAUSTED,  # terminal and dead-lettered, as WorkOutcome.unknown
    Origin: Origin.MANUAL,  # an act off the schedule, never taken for a scheduled instant
}


# --- building blocks -----------------------------------------------------------------------


@event
@dataclass(frozen=True, slots=True)
class Signature:
    """Proof of origin: an HMAC-SHA256 over the canonical form (see :mod:`horae.contracts.signing`)
    with one of the tenant's ingress keys."""

    key_id: str
    value: str  # lowercase hex
    alg: str = "hmac-sha256"


@event
@dataclass(frozen=True, slots=True)
class Recurrence:
    """When: ``cron``: ``expr``; ``every``: ``interval_s`` (+ ``anchor``); ``at``: ``instants``."""

    kind: RecurrenceKind
    expr: str | None = None
    interval_s: int | None = None  # every: elapsed seconds between instants
    anchor: datetime | None = None
    instants: tuple[datetime, ...] = ()  # at: one-shot instants
    zone: str = "UTC"
    dst_gap: DstGap = DstGap.SHIFT
    dst_repeat: DstRepeat = DstRepeat.FIRST
    start: datetime | None = None  # no instant before it
    end: datetime | None = None  # no instant after it
    count: int | None = None  # since v3: fire this many scheduled instants, then complete


@event
@dataclass(frozen=True, slots=True)
class OidcToken:
    """Since v8: each attempt carries ``Authorization: Bearer <JWT>``, an OIDC-style identity
    token minted for that attempt and expiring with it (Cloud Scheduler's ``oidcToken``), signed
    by a key the API publishes at ``/.well-known/jwks.json`` (:mod:`horae.outbound.oidc`).
    ``audience``: the token's ``aud``; null: the target URL's origin."""

    audience: str | None = None


@event
@dataclass(frozen=True, slots=True)
class Target:
    """Where: a signed webhook call (the dispatcher), or an event target: the planner produces the
    ``schedule.triggered`` event itself, in the transaction of the fire record, to ``topic`` —
    ``events.<token>`` or ``events.<token>.<suffix>`` of the trigger's own tenant (any other topic
    is refused at ingress; one accepted before that rule goes to the tenant's events topic).
    ``body`` (webhooks): ``envelope`` (the Standard Webhooks JSON envelope around the payload,
    :mod:`horae.delivery.envelope`) or ``raw`` (the payload bytes with their own content type)."""

    kind: TargetKind
    url: str | None = None
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)
    topic: str | None = None
    secret_refs: tuple[str, ...] = ()  # signing secrets, current first (rotation)
    timeout_ms: int = 10_000  # bounds each attempt (and HORAE_DISPATCHER_DEADLINE_S, if lower)
    body: str = "envelope"  # since v3: "envelope" | "raw"
    oidc: OidcToken | None = None  # since v8: an identity token on each attempt (webhooks only)


@event
@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    base_s: float = 1.0
    max_s: float = 300.0
    honour_retry_after: bool = True
    multiplier: float = 2.0  # since v2
    jitter_ratio: float = 0.5  # since v2
    #: since v6: a fire older than this (seconds) when it would be sent is not sent (expired),
    #: and no retry starts past it (EventBridge MaximumEventAgeInSeconds); null: no bound
    max_event_age_s: int | None = None
    #: since v6: no retry starts this long (seconds) after the first attempt started (Cloud
    #: Scheduler maxRetryDuration); null: no bound
    max_retry_duration_s: int | None = None


@event
@dataclass(frozen=True, slots=True)
class Policies:
    misfire: Misfire = Misfire.FIRE_ONCE
    max_catchup: int = 10  # bound for fire_all
    horizon_s: int = 86_400  # catch-up horizon: older instants are expired
    overlap: Overlap = Overlap.ALLOW
    jitter_s: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    misfire_grace_s: int = 60  # since v2: later than this counts as missed
    #: since v7: ``delete``: once a bounded trigger's last instant is decided (its count, its
    #: end, its last ``at``), the planner deletes the definition (needs such a bound)
    action_after_completion: ActionAfterCompletion = ActionAfterCompletion.NONE


@event
@dataclass(frozen=True, slots=True)
class Quotas:
    """Per-trigger quotas. ``backfill_max_fires``: the most fires one backfill of this trigger
    may produce (the planner applies the lower of it and the tenant's grant). The dispatch limits
    are the tenant's grant alone (:class:`horae.contracts.grants.TenantGrant`, applied by the
    dispatcher): ``dispatch_per_s``, ``catchup_share`` and ``max_concurrency`` are reserved here,
    a definition must leave them at their defaults (any other value is refused at ingest, cause
    ``invalid``; Avro fields are kept for compatibility)."""

    dispatch_per_s: float = 10.0
    catchup_share: float = 0.2
    backfill_max_fires: int = 1_000
    max_concurrency: int | None = None


# --- events ----------------------------------------------------------------------------------


@event
@dataclass(frozen=True, slots=True)
class TriggerDefinition:
    """A full version of a trigger (topic ``definitions``, key = trigger key, compacted)."""

    tenant: str
    trigger_id: str
    version: int
    state: DefinitionState
    recurrence: Recurrence
    target: Target
    authored_at: datetime
    author: str
    role: Role = Role.AUTHOR
    payload: bytes = b""
    content_type: str = "application/json"
    policies: Policies = field(default_factory=Policies)
    quotas: Quotas = field(default_factory=Quotas)
    description: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    signature: Signature | None = None


@event
@dataclass(frozen=True, slots=True)
class Command:
    """An imperative request (topic ``commands``, key = trigger key)."""

    command_id: str
    tenant: str
    trigger_id: str
    kind: CommandKind
    requested_by: str
    role: Role
    requested_at: datetime
    backfill_from: datetime | None = None
    backfill_to: datetime | None = None
    reason: str | None = None
    signature: Signature | None = None
    expires_at: datetime | None = None  # required by the planner, at most now + its maximum TTL
    #: since v9: set, the command cancels that one fire of the trigger (its remaining attempts;
    #: one in flight finishes). ``kind`` is then ``pause``: a new value carried by a new field,
    #: as docs/contracts.md ("Evolving a schema") says, and the kind an older planner takes it
    #: for is the enum's safe default (audited, undone by a resume)
    cancel_fire_key: str | None = None


#: The ``trigger_id`` of a command to a whole tenant (pause: suspend, resume: lift; platform only).
TENANT_WIDE = "*"


@event
@dataclass(frozen=True, slots=True)
class AppliedCommand:
    """A command the planner applied, remembered in its state until it expires (a replay is
    refused); a manual run keeps its instant and the sequence of its fire key."""

    command_id: str
    expires_at: datetime
    scheduled_at: datetime | None = None
    sequence: int = 0


@event
@dataclass(frozen=True, slots=True)
class FireRecord:
    """The decision about one instant (topic ``fires``, key = fire key, partitioned by trigger)."""

    fire_key: str  # FireKey.canonical()
    key_hash: str  # FireKey.short_hash()
    tenant: str
    trigger_id: str
    origin: Origin
    scheduled_at: datetime
    sequence: int
    jitter_ms: int
    due_at: datetime
    decided_at: datetime
    state: FireState
    trigger_version: int
    tzdata_version: str
    target_kind: TargetKind
    lane: Lane | None = None
    cause: str | None = None  # why not dispatched: "skipped: misfire policy", "expired: past
    # horizon", "tenant suspended" (docs/contracts.md lists every cause and who writes it)
    cause_detail: str | None = None
    command_id: str | None = None


@event
@dataclass(frozen=True, slots=True)
class DispatchOrder:
    """A committed fire handed to a lane (topics ``lane.<lane>``, key = fire key)."""

    fire: FireRecord
    target: Target
    lane: Lane
    attempt: int  # the attempt this order asks for (1 = first)
    not_before: datetime  # a retry waits until then
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    payload: bytes = b""
    content_type: str = "application/json"
    deadline: datetime | None = None  # retries truncated at the next instant
    #: since v4: set on a *cancel marker* (its cause, e.g. "cancelled: replaced"): the planner
    #: replaced this fire; a dispatcher still holding its first attempt drops it, never sends it
    cancel: str | None = None


@event
@dataclass(frozen=True, slots=True)
class PlannerState:
    """The planner's per-trigger state (topic ``planner-state``, key = trigger key, compacted).

    Deprecated, never written (always their defaults): ``next_sequence``, ``last_fire_key``,
    ``backfill_command_id``, ``backfill_cursor``, ``backfill_to`` (a backfill fires its whole
    window in one transaction, and a manual run's sequence comes from ``applied_commands``). They
    have defaults, so a later release may drop them compatibly."""

    tenant: str
    trigger_id: str
    trigger_version: int
    state: DefinitionState
    updated_at: datetime
    next_instant: datetime | None = None
    next_sequence: int = 0
    last_decided: datetime | None = None
    last_fire_key: str | None = None
    paused_since: datetime | None = None
    running_fire_key: str | None = None  # overlap: the fire running (order out, no outcome read)
    buffered_fire_key: str | None = None  # overlap: the fire held until the running one ends
    backfill_command_id: str | None = None
    backfill_cursor: datetime | None = None
    backfill_to: datetime | None = None
    applied_commands: tuple[AppliedCommand, ...] = ()
    fired: int = 0  # since v3: scheduled instants fired so far (for Recurrence.count)
    tzdata_version: str | None = None  # since v4: the release next_instant was computed with
    #: since v4 (overlap): when the running fire stops counting as running without an outcome
    running_until: datetime | None = None
    running_lane: Lane | None = None  # since v4: the lane of the running fire's order
    buffered_lane: Lane | None = None  # since v4: the lane the buffered fire goes on


@event
@dataclass(frozen=True, slots=True)
class Attempt:
    """One dispatch attempt (topic ``attempts``, key = fire key)."""

    fire_key: str
    key_hash: str
    tenant: str
    trigger_id: str
    n: int
    lane: Lane
    started_at: datetime
    ended_at: datetime
    transport_result: TransportResult
    duration_ms: int
    http_status: int | None = None
    error: str | None = None
    retry_after_s: float | None = None
    next_attempt_at: datetime | None = None
    tzdata_version: str | None = None  # since v4: the fire's (its FireRecord's)
    not_sent: str | None = None  # since v4: why nothing was sent (a NotSent value), else null


@event
@dataclass(frozen=True, slots=True)
class WorkOutcome:
    """The final result of a fire's dispatch (topic ``outcomes``, key = fire key)."""

    fire_key: str
    key_hash: str
    tenant: str
    trigger_id: str
    state: OutcomeState
    attempts: int
    decided_at: datetime
    first_attempt_at: datetime | None = None
    last_attempt_at: datetime | None = None
    http_status: int | None = None
    error: str | None = None
    unknown: bool = False  # since v4: the result is unknown (``state`` is then ``exhausted``)
    source: str | None = None  # since v4: an OutcomeSource value (null: written before v4)
    tzdata_version: str | None = None  # since v4: the fire's (its FireRecord's)


@event
@dataclass(frozen=True, slots=True)
class ScheduleEvent:
    """Public, tenant-facing (the tenant's own topic ``events.<token>``; an event target's
    ``schedule.triggered`` goes to the topic it names; key = trigger key)."""

    event_id: str
    type: str  # a ScheduleEventType value; unknown values must be ignored by subscribers
    tenant: str
    trigger_id: str
    emitted_at: datetime
    trigger_version: int
    fire_key: str | None = None
    key_hash: str | None = None
    origin: Origin | None = None
    scheduled_at: datetime | None = None
    due_at: datetime | None = None
    payload: bytes = b""
    content_type: str = "application/json"
    cause: str | None = None
    attempt: int | None = None
    http_status: int | None = None
    tzdata_version: str | None = None  # since v4: the tzdata release its instants came from


@event
@dataclass(frozen=True, slots=True)
class Quarantined:
    """A record that could not be accepted (topic ``quarantine``), with its cause and bytes."""

    source_topic: str
    source_partition: int
    source_offset: int
    cause: str  # a short code: "framing", "json", "schema", "avro", "invalid", "unsigned",
    # "signature", "forbidden", "replayed", "expired", ... (docs/contracts.md)
    detail: str
    original: bytes
    quarantined_at: datetime
    original_key: bytes | None = None
    tenant: str | None = None
    trigger_id: str | None = None


@event
@dataclass(frozen=True, slots=True)
class AuditEntry:
    """A privileged act (topic ``audit``, key = tenant, kept long)."""

    audit_id: str
    tenant: str
    principal: str
    role: Role
    action: str  # an act of horae.contracts.grants.Act (e.g. "backfill.request", "tenant.suspend",
    # "horizon.above_default", "quotas.above_default": a definition using a grant), "dlq.redrive",
    # or "completion.delete" (the planner deleting a completed trigger)
    at: datetime
    allowed: bool
    trigger_id: str | None = None
    command_id: str | None = None
    detail: Mapping[str, str] = field(default_factory=dict)


Event = (
    TriggerDefinition
    | Command
    | FireRecord
    | DispatchOrder
    | PlannerState
    | Attempt
    | WorkOutcome
    | ScheduleEvent
    | Quarantined
    | AuditEntry
)

EVENT_TYPES: tuple[type[Event], ...] = (
    TriggerDefinition,
    Command,
    FireRecord,
    DispatchOrder,
    PlannerState,
    Attempt,
    WorkOutcome,
    ScheduleEvent,
    Quarantined,
    AuditEntry,
)

# The value objects many triggers share: decoded once per distinct encoding and then shared
# (horae.contracts.binary_readers).
INTERNED: tuple[type, ...] = (Recurrence, Target, RetryPolicy, Policies, Quotas)


def trigger_key(tenant: str, trigger_id: str) -> str:
    """The Kafka key of a trigger (definitions, planner state, commands, schedule events)."""
    return f"{tenant}/{trigger_id}"
