"""Who may read and write a collection from a web or mobile client: :class:`ClientAccess`.

The Python server client goes through IAM and bypasses security rules; browsers and devices
go through them. A declaration says, per collection, what the generated ``firestore.rules``
(:mod:`tsstore.rules`) lets those clients do (the parameters of :class:`ClientAccess`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tsstore.errors import SpecError, refuse_unknown_keys

ReadAccess = Literal["none", "signed-in", "public", "custom"]
CreateAccess = Literal["none", "signed-in", "custom"]
READ_ACCESS: tuple[ReadAccess, ...] = ("none", "signed-in", "public", "custom")
CREATE_ACCESS: tuple[CreateAccess, ...] = ("none", "signed-in", "custom")
#: The largest ``limit`` a client's list query may carry, unless the declaration says otherwise.
DEFAULT_MAX_LIMIT = 1000


def _check_who(read: object, create: object) -> None:
    """Refuse a ``read`` or ``create`` value that is not one of the allowed ones."""
    if read not in READ_ACCESS:
        raise SpecError(f"access read={read!r} is not allowed; use one of {', '.join(READ_ACCESS)}")
    if create not in CREATE_ACCESS:
        public = str(create) == "public"
        why = " (anyone could write ticks: sign devices in, anonymously if need be)" if public else ""
        raise SpecError(f"access create={create!r} is not allowed{why}; use one of {', '.join(CREATE_ACCESS)}")


def _checked_condition(condition: str | None, read: str, create: str) -> str | None:
    """The rules expression ``custom`` access needs (and only it): one line, no comment."""
    custom = "custom" in (read, create)
    if custom and (not isinstance(condition, str) or not condition.strip()):
        raise SpecError(
            f"access read={read!r}, create={create!r} needs condition, a security rules expression "
            "such as \"request.auth.token.desk == 'fx'\""
        )
    if not custom and condition is not None:
        raise SpecError(
            f"access condition {condition!r} is used only with read='custom' or create='custom'; "
            f"got read={read!r}, create={create!r}"
        )
    if condition is not None and ("\n" in condition or "\r" in condition or "//" in condition):
        raise SpecError(f"access condition {condition!r} must be one line, without // comments")
    return None if condition is None else condition.strip()


@dataclass(frozen=True)
class ClientAccess:
    """What web and mobile clients may do with one collection.

    - ``read``: ``"signed-in"`` (the default: any signed-in user), ``"public"`` (anyone, signed
      in or not), ``"custom"`` (the rules expression ``condition``) or ``"none"``
    - ``create``: ``"none"`` (the default: only the server writes), ``"signed-in"`` or
      ``"custom"``. A client create is checked against the declaration (the shard among the
      active values, the timestamp a timestamp, the key fields present, every field declared
      and of its declared type); a tick is never updated or deleted by a client. Where the
      series are counted, a client may add to its series counter's shard documents, and
      nothing else.
    - ``condition``: a Firestore security rules expression (``request.auth.token.desk ==
      'fx'``), used where ``read`` or ``create`` is ``"custom"``
    - ``max_limit``: the largest ``limit`` a client's list query may carry (an unbounded
      query would be billed for the whole collection)
    """

    read: ReadAccess = "signed-in"
    create: CreateAccess = "none"
    condition: str | None = None
    max_limit: int = DEFAULT_MAX_LIMIT

    def __init__(
        self,
        read: ReadAccess = "signed-in",
        *,
        create: CreateAccess = "none",
        condition: str | None = None,
        max_limit: int = DEFAULT_MAX_LIMIT,
    ) -> None:
        _check_who(read, create)
        condition = _checked_condition(condition, read, create)
        if isinstance(max_limit, bool) or not isinstance(max_limit, int) or max_limit < 1:
            raise SpecError(f"access max_limit {max_limit!r} is not allowed; give a positive integer")
        object.__setattr__(self, "read", read)
        object.__setattr__(self, "create", create)
        object.__setattr__(self, "condition", condition)
        object.__setattr__(self, "max_limit", max_limit)

    @property
    def reads(self) -> bool:
        return self.read != "none"

    @property
    def creates(self) -> bool:
        return self.create != "none"

    def read_only(self) -> ClientAccess:
        """The same reads, no client writes (what a roll-up of this collection gets)."""
        condition = self.condition if self.read == "custom" else None
        return ClientAccess(self.read, condition=condition, max_limit=self.max_limit)

    def describe(self) -> str:
        """One line for the rules file's comment: who reads, who creates."""
        who = {
            "signed-in": "signed-in clients {}",
            "public": "anyone {}s",
            "custom": "clients meeting the condition {}",
        }
        reads = "no client reads"
        if self.reads:
            reads = who[self.read].format("read") + f" (list queries with limit <= {self.max_limit}, no offset)"
        creates = who[self.create].format("create") + " validated ticks" if self.creates else "no client writes"
        return f"{reads}; {creates}"


_ACCESS_KEYS = ("read", "create", "condition", "max_limit")


def access_from(value: object) -> ClientAccess:
    """A :class:`ClientAccess`, a read keyword (``"public"``) or a table of its options (a
    declaration file's ``access = {read = "public", max_limit = 200}``)."""
    if isinstance(value, ClientAccess):
        return value
    if isinstance(value, str):
        return ClientAccess(value)  # type: ignore[arg-type]  # checked by ClientAccess
    if isinstance(value, Mapping):
        refuse_unknown_keys(value, _ACCESS_KEYS, where=f"access {dict(value)!r}")
        return ClientAccess(**value)
    raise SpecError(
        f"access {value!r} is not allowed; give a ClientAccess, one of {', '.join(READ_ACCESS)}, "
        f"or a table of {', '.join(_ACCESS_KEYS)}"
    )


#: What a declaration that says nothing gets: signed-in clients read with a bounded limit;
#: only the server writes.
DEFAULT_ACCESS = ClientAccess()
