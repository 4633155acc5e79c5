"""How a request becomes a public verb of both stores.

The descriptors here (:class:`verb`, :class:`stream`, :class:`live`) give each store its
method from the same request function: the sync store (a :class:`ThreadDriver`) returns the
result (a :class:`TickStream`, the listeners), the async store (a :class:`LoopDriver`) an
awaitable (an :class:`AsyncTickStream`, an :class:`~tsstore.live.aio.AsyncLive`), so the two
cannot drift apart. The method shows the request's docstring and signature (options expanded)
and refuses a keyword the request does not take by name.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from tsstore.analytics.asof import ASOF_DEFAULTS
from tsstore.counting import AsyncCounter, SeriesCounter, SyncCounter
from tsstore.errors import OptionError, QueryError
from tsstore.live.aio import AsyncLive
from tsstore.read.cost import ReadStats
from tsstore.read.query import Query
from tsstore.spec import SeriesSpec
from tsstore.telemetry import VerbCall, called
from tsstore.verbs.request import Readable, Request, Seat

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


@dataclass
class Reading(Generic[T]):
    """A read handed to the caller as a stream: ``opening`` (the read, or a request whose
    result is the read; it runs when the first tick is asked for), what the read has cost so
    far (``stats``), and ``rows``: ticks as they come (None) or DataFrames of at most that
    many rows (built by ``spec``, of the projected ``columns`` if given; Arrow record batches
    when ``arrow``)."""

    opening: Request[Readable] | Readable
    stats: ReadStats
    spec: SeriesSpec
    rows: int | None = None
    columns: tuple[str, ...] | None = None
    arrow: bool = False


class TickStream(Iterator[T]):
    """What a streaming verb of :class:`~tsstore.store.TimeSeriesStore` returns: its ticks
    (or frames), and ``stats``, what reading them has cost so far.

    - ``items``: what the stream hands out, in order: ticks, or DataFrames or Arrow record
      batches of them; the read runs as they are asked for
    - ``stats``: the :class:`~tsstore.read.cost.ReadStats` the read adds its cost to as
      ``items`` are read (the one the verb was given, or a new one)"""

    def __init__(self, items: Iterator[T], stats: ReadStats) -> None:
        self._items = items
        self.stats = stats

    def __next__(self) -> T:
        return next(self._items)

    def _trace(self, call: VerbCall) -> TickStream[T]:
        """This stream as the verb call ``call``: its span current while an item is read (when
        recorded), ended when the stream ends, fails or is dropped."""
        self._items = _traced(self._items, call)
        return self


class AsyncTickStream(AsyncIterator[T]):
    """What a streaming verb of :class:`~tsstore.aio.AsyncTimeSeriesStore` returns (``async
    for``), and ``stats``: what reading it has cost so far.

    - ``items``: what the stream hands out, in order: ticks, or DataFrames or Arrow record
      batches of them; the read runs as they are asked for
    - ``stats``: the :class:`~tsstore.read.cost.ReadStats` the read adds its cost to as
      ``items`` are read (the one the verb was given, or a new one)"""

    def __init__(self, items: AsyncIterator[T], stats: ReadStats) -> None:
        self._items = items
        self.stats = stats

    async def __anext__(self) -> T:
        return await anext(self._items)

    def _trace(self, call: VerbCall) -> AsyncTickStream[T]:
        """As :class:`TickStream`'s, for ``async for``."""
        self._items = _atraced(self._items, call)
        return self


def _traced(items: Iterator[T], call: VerbCall) -> Iterator[T]:
    with call.ending():
        if not call.recording:  # no span to make current: an item costs no context switch
            yield from items
            return
        while (item := _step(items, call)) is not _END:
            yield item


def _step(items: Iterator[T], call: VerbCall) -> T:
    """The next item, or :data:`_END`, read with the call's span current."""
    with call.running():
        item: T = next(items, _END)
        return item


async def _atraced(items: AsyncIterator[T], call: VerbCall) -> AsyncIterator[T]:
    with call.ending():
        if not call.recording:
            async for item in items:
                yield item
            return
        while (item := await _astep(items, call)) is not _END:
            yield item


async def _astep(items: AsyncIterator[T], call: VerbCall) -> T:
    with call.running():
        item: T = await anext(items, _END)
        return item


_END: Any = object()


L = TypeVar("L")


@dataclass
class Listening(Generic[L, T]):
    """A live read: ``opening``, a request that asks for the listeners and returns the live
    object (``L``) the store's backend answers with; ``step``, the live object's method that
    waits for its next item (``T``)."""

    opening: Request[L]
    step: str


# ---------------------------------------------------------------------------- the two drivers


class ThreadDriver:
    """A store that answers asks on threads (:class:`~tsstore.store.TimeSeriesStore`)."""

    seat: Seat
    #: The database mode its spans name (``native``, ``datastore``, ``memory``).
    mode: str

    def _run(self, request: Request[R]) -> R:
        raise NotImplementedError

    def _stream(self, reading: Reading[T]) -> TickStream[T]:
        raise NotImplementedError

    def _listen(self, listening: Listening[L, object]) -> L:
        raise NotImplementedError


class LoopDriver:
    """A store that answers asks on an event loop (:class:`~tsstore.aio.AsyncTimeSeriesStore`)."""

    seat: Seat
    mode: str

    async def _run(self, request: Request[R]) -> R:
        raise NotImplementedError

    def _stream(self, reading: Reading[T]) -> AsyncTickStream[T]:
        raise NotImplementedError

    def _listen(self, listening: Listening[object, T]) -> AsyncLive[T]:
        raise NotImplementedError


#: Either store.
Driver = ThreadDriver | LoopDriver


# ---------------------------------------------------------------------------- declaring a verb


class _Declared(Generic[P, R]):
    """A public verb made from one request function ``make(seat, ...)``: its name, signature
    (options expanded) and docstring are the request's, and a keyword it does not take is an
    :class:`~tsstore.errors.OptionError` (a ``TypeError``) naming the verb."""

    def __init__(self, make: Callable[Concatenate[Seat, P], object]) -> None:
        self._make = make
        self.__doc__ = make.__doc__
        self.__name__ = make.__name__
        self._signature: inspect.Signature | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        self.__name__ = name

    @property
    def signature(self) -> inspect.Signature:
        """The verb's signature as a user sees it: without the seat, each option of an
        ``**options: Unpack[SomeOptions]`` listed as a keyword-only parameter."""
        if self._signature is None:
            self._signature = public_signature(self._make)
        return self._signature

    def signature_of(self, owner: type) -> inspect.Signature:
        """The verb's signature on store class ``owner``: the result as that store returns it."""
        base = self.signature
        return base.replace(return_annotation=self._returns(base.return_annotation, issubclass(owner, LoopDriver)))

    def _returns(self, result: object, asynchronous: bool) -> object:
        """What a store returns for a request whose result is ``result`` (awaited, when
        ``asynchronous``)."""
        return result

    def _call(self, store: Driver, kwargs: dict[str, object]) -> VerbCall:
        """This verb's call on ``store`` as OpenTelemetry sees it (a ``stats`` given is counted
        from its figures now)."""
        return VerbCall(self.__name__, store.seat.spec.collection, store.mode, kwargs.get("stats"))

    def _request(self, store: Driver, args: tuple[object, ...], kwargs: dict[str, object]) -> Any:
        self._check(args, kwargs)
        make: Callable[..., Any] = self._make  # the arguments were checked against its signature
        return make(store.seat, *args, **kwargs)

    def _check(self, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        """Refuse, by name, a keyword the verb does not take, a flag that is not ``True`` or
        ``False`` (``"false"`` would be true), and a positional query that is not a ``Query``."""
        params = self.signature.parameters
        unknown = sorted(k for k in kwargs if k not in params or params[k].kind is inspect.Parameter.POSITIONAL_ONLY)
        if unknown:
            allowed = [p.name for p in params.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
            raise OptionError(self.__name__, unknown, allowed)
        for name, value in kwargs.items():
            if params[name].annotation in ("bool", bool) and not isinstance(value, bool):
                raise QueryError(f"{self.__name__}: {name}={value!r} is not allowed; give True or False")
            if value is not None:
                self._check_kind(name, str(params[name].annotation), value)
        positional = [p for p in params.values() if p.kind is inspect.Parameter.POSITIONAL_ONLY]
        for param, value in zip(positional, args):
            if "Query" in str(param.annotation) and value is not None and not isinstance(value, Query):
                raise QueryError(
                    f"{self.__name__}: the {param.name} query must be a tsstore.Query (e.g. Query(where=...)), "
                    f"got {type(value).__name__} {value!r}; or give its fields as keywords"
                )

    def _check_kind(self, name: str, annotation: str, value: object) -> None:
        """Refuse, before any read or write, a value of another kind than the option takes
        where using it would fail later with Python's own error: a ``ReadStats``, a function,
        a list of field names."""
        wanted = None
        if "ReadStats" in annotation and not isinstance(value, ReadStats):
            wanted = "a tsstore.read.cost.ReadStats (the verb adds its cost to it)"
        elif "Callable" in annotation and not callable(value):
            wanted = "a function"
        elif ("Iterable[str]" in annotation or "Sequence[str]" in annotation) and not isinstance(value, Iterable):
            wanted = "a list of field names"
        if wanted is not None:
            unset = ", or None" if "None" in annotation else ""
            raise QueryError(f"{self.__name__}: {name}={value!r} is not allowed; give {wanted}{unset}")

    def _get(
        self, store: Driver | None, owner: type, bind: Callable[[Any], Callable[..., object]]
    ) -> Callable[..., object]:
        """What ``store.<verb>`` is: the class's view without a store; else ``bind(store)``,
        made once per store (kept in its ``__dict__``, where later lookups find it first:
        this descriptor defines no ``__set__``)."""
        if store is None:
            return self._unbound(owner)
        bound = store.__dict__[self.__name__] = self._bound(bind(store), self.signature_of(owner))
        return bound

    def _bound(self, call: Callable[..., object], signature: inspect.Signature) -> Callable[..., object]:
        wrapper = functools.update_wrapper(call, self._make)  # ``call`` itself, typed as a wrapper
        call.__name__ = call.__qualname__ = self.__name__
        call.__signature__ = signature  # type: ignore[attr-defined]
        del wrapper.__wrapped__  # help() and inspect show the public signature, not the request's
        return call

    def _unbound(self, owner: type) -> Callable[..., object]:
        """The verb as class ``owner`` shows it (``help(TimeSeriesStore)``, the API reference):
        a function of the store and the verb's own parameters, returning what that store does."""
        name = self.__name__
        store = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        shown = self.signature_of(owner)
        signature = shown.replace(parameters=[store, *shown.parameters.values()])
        return self._bound(lambda store, *args, **kwargs: getattr(store, name)(*args, **kwargs), signature)


class verb(_Declared[P, R]):
    """A verb that returns a result: the sync store's method returns it, the async store's
    is awaited."""

    def __init__(self, make: Callable[Concatenate[Seat, P], Request[R]]) -> None:
        super().__init__(make)

    @overload
    def __get__(self, store: None, owner: type) -> Callable[Concatenate[Driver, P], object]: ...
    @overload
    def __get__(self, store: ThreadDriver, owner: type) -> Callable[P, R]: ...
    @overload
    def __get__(self, store: LoopDriver, owner: type) -> Callable[P, Awaitable[R]]: ...
    def __get__(self, store: Driver | None, owner: type) -> Callable[..., object]:
        return self._get(store, owner, self._awaited if issubclass(owner, LoopDriver) else self._returned)

    def _returned(self, store: ThreadDriver) -> Callable[..., object]:
        return lambda *args, **kwargs: called(
            self._call(store, kwargs), lambda: store._run(self._request(store, args, kwargs))
        )

    def _awaited(self, store: LoopDriver) -> Callable[..., Awaitable[object]]:
        async def awaited(*args: object, **kwargs: object) -> object:
            call = self._call(store, kwargs)
            with call.ending(), call.running():
                return call.returned(await store._run(self._request(store, args, kwargs)))

        return awaited


class counter(verb[P, SeriesCounter]):
    """The verb that gives a series' counter: a :class:`~tsstore.counting.SyncCounter` from
    the sync store, an :class:`~tsstore.counting.AsyncCounter` (awaited) from the async one."""

    @overload
    def __get__(self, store: None, owner: type) -> Callable[Concatenate[Driver, P], object]: ...
    @overload
    def __get__(self, store: ThreadDriver, owner: type) -> Callable[P, SyncCounter]: ...
    @overload
    def __get__(self, store: LoopDriver, owner: type) -> Callable[P, Awaitable[AsyncCounter]]: ...
    def __get__(self, store: Driver | None, owner: type) -> Callable[..., object]:
        return super().__get__(store, owner)

    def _returns(self, result: object, asynchronous: bool) -> object:
        return AsyncCounter if asynchronous else SyncCounter


class stream(_Declared[P, R]):
    """A verb that returns a stream of ticks or frames (its request function returns a
    :class:`Reading`): a :class:`TickStream` from the sync store, an
    :class:`AsyncTickStream` from the async one."""

    def __init__(self, make: Callable[Concatenate[Seat, P], Reading[R]]) -> None:
        super().__init__(make)

    @overload
    def __get__(self, store: None, owner: type) -> Callable[Concatenate[Driver, P], object]: ...
    @overload
    def __get__(self, store: ThreadDriver, owner: type) -> Callable[P, TickStream[R]]: ...
    @overload
    def __get__(self, store: LoopDriver, owner: type) -> Callable[P, AsyncTickStream[R]]: ...
    def __get__(self, store: Driver | None, owner: type) -> Callable[..., object]:
        return self._get(store, owner, self._streamed)

    def _streamed(self, store: Driver) -> Callable[..., object]:
        def streamed(*args: object, **kwargs: object) -> object:
            call = self._call(store, kwargs)
            return called(call, lambda: store._stream(self._request(store, args, kwargs)), ends=False)._trace(call)

        return streamed

    def _returns(self, result: object, asynchronous: bool) -> object:
        [item] = typing.get_args(result) or (Any,)
        return AsyncTickStream[item] if asynchronous else TickStream[item]  # type: ignore[valid-type]


class live(_Declared[P, object], Generic[P, L, T]):
    """A live verb (its request function returns a :class:`Listening`): the listeners' own
    object from the sync store (iterate it, ``close()`` it), an :class:`AsyncLive` over it
    from the async one."""

    def __init__(self, make: Callable[Concatenate[Seat, P], Listening[L, T]]) -> None:
        super().__init__(make)

    @overload
    def __get__(self, store: None, owner: type) -> Callable[Concatenate[Driver, P], object]: ...
    @overload
    def __get__(self, store: ThreadDriver, owner: type) -> Callable[P, L]: ...
    @overload
    def __get__(self, store: LoopDriver, owner: type) -> Callable[P, AsyncLive[T]]: ...
    def __get__(self, store: Driver | None, owner: type) -> Callable[..., object]:
        return self._get(store, owner, self._listening)

    def _listening(self, store: Driver) -> Callable[..., object]:
        def listening(*args: object, **kwargs: object) -> object:
            call = self._call(store, kwargs)
            if isinstance(store, ThreadDriver):  # started now: the call ends with the start
                return called(call, lambda: store._listen(self._request(store, args, kwargs)))
            live = called(call, lambda: store._listen(self._request(store, args, kwargs)), ends=False)
            return live._trace(call)  # started when first used: the call ends then

        return listening

    def _returns(self, result: object, asynchronous: bool) -> object:
        live_object, item = typing.get_args(result) or (Any, Any)
        return AsyncLive[item] if asynchronous else live_object  # type: ignore[valid-type]


def public_signature(make: Callable[..., object]) -> inspect.Signature:
    """``make``'s signature as its verb shows it: without its first parameter (the seat),
    ``**options: Unpack[SomeOptions]`` expanded into one keyword-only parameter per option
    (with :class:`~tsstore.read.query.Query`'s default), and a request's result as the
    return annotation."""
    signature = inspect.signature(make)
    hints = typing.get_type_hints(make, localns=_optional_types(make))
    params: list[inspect.Parameter] = []
    for param in list(signature.parameters.values())[1:]:
        if param.kind is not inspect.Parameter.VAR_KEYWORD:
            params.append(param.replace(annotation=hints.get(param.name, param.annotation)))
            continue
        [options] = typing.get_args(hints[param.name])
        for name, kind in typing.get_type_hints(options).items():
            default = OPTION_DEFAULTS[name]
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind))
    returns = hints.get("return", signature.return_annotation)
    if typing.get_origin(returns) is Generator:
        returns = typing.get_args(returns)[2]
    return signature.replace(parameters=params, return_annotation=returns)


def _optional_types(make: Callable[..., object]) -> dict[str, object]:
    """The names of an extra's types in ``make``'s annotations (``pl``: Polars, imported only
    for a verb that returns its frames; ``Any`` when the extra is not installed, and the verb
    says what to install when called)."""
    if "pl." not in str(make.__annotations__.get("return", "")):
        return {}
    try:
        import polars
    except ImportError:
        return {"pl": types.SimpleNamespace(DataFrame=Any)}
    return {"pl": polars}


#: What an option a verb takes as ``**options: Unpack[...]`` is when not given: a query field's
#: default, an as-of join's.
OPTION_DEFAULTS: dict[str, object] = {**{f.name: f.default for f in dataclasses.fields(Query)}, **ASOF_DEFAULTS}
