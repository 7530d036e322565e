"""Plugins run in worker processes: each pass of an audited evaluation in a fresh one.

A plugin loaded in the harness's own process can read the harness (its stack frames, its progress
bars, ``gc.get_objects()``), tell the causality audit's pass from the evaluation's
(:mod:`harness.causality`) and cheat in the evaluation only. So :class:`WorkerPlugin` (a
:class:`harness.passes.ModelPasses`) runs each pass in a process of its own, started with the
``spawn`` context: a fresh interpreter that holds nothing of the harness's memory (``fork`` of the
harness would copy it, and breaks CUDA). On a CPU the first worker loads the model once and forks
a process for each pass from it (:func:`serve`), which starts from the loaded model and nothing
else; elsewhere each pass gets a worker of its own, which loads the model again. The worker
rebuilds the dataset from its files (:class:`DatasetFiles`; the token cache serves its streams),
loads the plugin as the harness would (:func:`harness.plugin.load_factory`,
:func:`harness.plugin.create_model`, then ``--threads``) and answers the calls of one pass:
``reset``, ``score``, ``score_stream``, ``result_metadata``. It never receives the audit's plan nor
which pass it serves. In the harness a proxy with exactly the plugin model's methods and its
``num_parameters`` and ``checkpoint`` stands for the model. The harness does not import the plugin
either (:func:`harness.plugin.locate_plugin`): its import could change the harness.

**Messages.** Requests (harness to worker) are pickled tuples of plain values and numpy arrays:
the harness is trusted. Replies are never unpickled: the plugin controls its worker. A reply is
one message framed with its length and read with a bound (``Connection.recv_bytes(maxlength)``):
:data:`REPLY_ALLOWANCE` plus what the request can need, ``8 (B T + K V)`` bytes for the scores of
a ``[B, T]`` chunk with ``K`` distributions asked for over ``V`` words. It is a line of JSON,
followed, for scores, by the raw little-endian float64 target log-probabilities (``[B, T]``) and
distributions (``[K, V]``). The worker converts a plugin's scores as the harness would
(:func:`harness.evaluate._as_float64`: arrays, tensors on any device), checks their type and
shapes (with the harness's messages) and says whether they were tensors on an accelerator; the
harness checks the arrays again, and everything else (:func:`harness.evaluate._validated_scores`).

**Failures.** A :class:`~harness.plugin.PluginError`, :class:`~harness.plugin.ModelUnavailable`
or :class:`~wikitext_toolkit_core.files.DatasetError` that the plugin raises is raised again in
the harness with its message. Any other exception, a ``sys.exit``, a worker that ends
(``os._exit``, a signal, a crash), that gives no answer within :class:`WorkerLimits` or sends a
reply too large or unreadable is a :class:`harness.passes.CallFailed`: one line naming the plugin
and the call (after the worker's traceback, for an exception). Every worker is ended and reaped
however its pass ends, and on Linux it dies with the harness (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import logging
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from harness.datasets import Dataset, end_with_parent
from harness.evaluate import _as_float64, distribution_shape_problem, not_chunk_scores, target_shape_problem
from harness.passes import CallFailed, ModelPasses, WorkerScores, scores_on_accelerator
from harness.plugin import (
    Chunk,
    ChunkScores,
    Model,
    ModelFacts,
    ModelUnavailable,
    PluginError,
    create_model,
    describe_exception,
    load_factory,
    metadata_problem,
    model_facts,
    set_model_threads,
)
from wikitext_toolkit_core import bounded_json
from wikitext_toolkit_core.allocator import retain_freed_memory
from wikitext_toolkit_core.cli import messages_on_stderr
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.threads import AUTO, ThreadRequest, choose_threads

logger = logging.getLogger(__name__)

#: Bytes a reply may hold beyond the arrays its request asks for: its line of JSON (a message, a
#: traceback, the plugin's metadata).
REPLY_ALLOWANCE = 1 << 20
#: The longest message and traceback a worker sends, in characters (at most 12 bytes each in
#: JSON): a message's start is kept, a traceback's end.
MAX_MESSAGE_CHARS = 10_000
MAX_TRACEBACK_CHARS = 40_000
#: The plugin model's methods that the harness calls; the proxy has those the model has.
METHODS = ("reset", "score", "score_stream", "result_metadata")
#: The one-line errors a plugin raises itself, raised again in the harness with their message.
ONE_LINE_ERRORS: dict[str, type[Exception]] = {
    "ModelUnavailable": ModelUnavailable,
    "DatasetError": DatasetError,
    "PluginError": PluginError,
}


@dataclasses.dataclass(frozen=True)
class WorkerLimits:
    """How long the harness waits for a worker's answer before it stops the worker and reports
    the call as hung. Generous: a model that scores a whole split in one ``score_stream`` call, or
    updates its weights as it scores (dynamic evaluation), takes long and is no hang.

    Attributes:
        load_seconds: for the factory (which may download a model or train one): 4 hours.
        call_seconds: for ``reset`` and ``result_metadata``, and the base of a scoring call:
            10 minutes.
        seconds_per_position: added to a scoring call for each position it scores (``B T`` of
            a chunk, ``L`` of a stream): 1 second.
        exit_seconds: for a worker to exit once its pass is done, before it is killed.
    """

    load_seconds: float = 4 * 3600.0
    call_seconds: float = 600.0
    seconds_per_position: float = 1.0
    exit_seconds: float = 30.0

    def scoring_seconds(self, positions: int) -> float:
        """The limit of a scoring call of ``positions`` positions."""
        return self.call_seconds + self.seconds_per_position * positions


#: The limits of ``harness eval`` and :func:`harness.api.evaluate_model`.
DEFAULT_LIMITS = WorkerLimits()


@dataclasses.dataclass(frozen=True)
class DatasetFiles:
    """What a worker rebuilds the harness's :class:`harness.datasets.Dataset` from: its files
    and their known checksums (the arguments of ``SplitFiles``), not its loaded token streams,
    which the token cache serves."""

    name: str
    directory: Path
    split_files: dict[str, str]
    expected_sha256: dict[str, str]
    canonical: bool

    @classmethod
    def of(cls, dataset: Dataset) -> DatasetFiles:
        return cls(
            dataset.name, dataset.directory, dataset.split_files, dataset.expected_sha256, dataset.canonical
        )

    def load(self) -> Dataset:
        return Dataset(
            self.name, self.directory, self.split_files, self.expected_sha256, canonical=self.canonical
        )


@dataclasses.dataclass(frozen=True)
class PluginLoad:
    """How a worker loads the plugin: as ``harness eval`` would in its own process.

    Attributes:
        plugin: as named (a registered name, ``module`` or ``module:attribute``).
        dataset: the dataset given to the factory.
        device, checkpoint, model_args: the factory's other arguments.
        threads: ``--threads``, applied to torch after the factory; None: torch's own choice.
        retain_memory: call :func:`wikitext_toolkit_core.allocator.retain_freed_memory` first
            (``harness eval`` on a CPU).
        quiet_load: drop what the factory prints (the workers after the first load the same
            model, whose notes the first has shown).
        fork_passes: load the model once and fork a process for each pass (:func:`serve`), where
            it is safe; otherwise each pass is served by a worker of its own.
    """

    plugin: str
    dataset: DatasetFiles
    device: str
    checkpoint: str | None
    model_args: dict[str, Any]
    threads: ThreadRequest | None
    retain_memory: bool
    quiet_load: bool = False
    fork_passes: bool = False


class WorkerPlugin(ModelPasses):
    """A plugin loaded afresh in a worker process for each pass of an evaluation.

    The first worker loads the model at once, so that the factory's errors
    (:class:`ModelUnavailable` among them) are raised here. On a CPU, where it is safe (see
    :func:`serve`), that worker is a template: it never scores, and each pass is served by a
    process forked from it, a copy of the loaded model that has seen nothing of any pass, which
    ends with its pass. Otherwise (an accelerator, or a factory that set torch's threads itself)
    the first worker serves the first pass, and each pass launches the worker of the next, which
    imports the plugin meanwhile and loads its model when that pass opens (one model in memory at
    a time). ``vocab_size``: the dataset's, the width of a reply's distributions."""

    plugin_process = "worker"

    def __init__(self, load: PluginLoad, vocab_size: int, limits: WorkerLimits = DEFAULT_LIMITS) -> None:
        load = dataclasses.replace(
            load, threads=_threads_left(load.threads), fork_passes=load.device == "cpu" and _can_fork()
        )
        first = _Worker.launch(load, limits).loaded()
        self._template = first if first.facts.forks else None
        self._ready: _Worker | None = None if first.facts.forks else first
        self._next: _Worker | None = None
        self._facts = first.facts
        threads = self._facts.threads  # later workers take the first one's count: `auto` decides once
        self._load = dataclasses.replace(
            load, threads=load.threads if threads is None else threads, quiet_load=True, fork_passes=False
        )
        self._limits = limits
        self._vocab_size = vocab_size

    def model_facts(self, name: str) -> ModelFacts:
        """What the first worker's model said of itself (checked there under the plugin's name)."""
        return self._facts.model

    @contextlib.contextmanager
    def open_pass(self, name: str) -> Iterator[Model]:
        if self._template is not None:
            with self._template.forked_pass():
                yield self._template.model(name, self._vocab_size)
            return
        worker, self._ready = self._ready, None
        if worker is None:
            launched, self._next = self._next or _Worker.launch(self._load, self._limits), None
            worker = launched.loaded()
        with worker:
            self._next = _Worker.launch(self._load, self._limits)  # it imports the plugin meanwhile
            yield worker.model(name, self._vocab_size)

    def close(self) -> None:
        """End the template, and the workers that no pass used (they have done nothing but load
        the plugin)."""
        for worker in (self._template, self._ready, self._next):
            if worker is not None:
                worker.close(graceful=worker is self._template)
        self._template = self._ready = self._next = None


def _can_fork() -> bool:
    """Whether this platform forks processes (:func:`os.fork`; not Windows)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _threads_left(request: ThreadRequest | None) -> ThreadRequest | None:
    """``--threads`` as the workers get it: ``auto`` decided here, before any worker starts, where
    no worker of this evaluation keeps a CPU busy (a worker that watched the CPUs itself would
    count the harness and its own next worker as other work): torch's own choice (None) when no
    other process keeps a CPU busy, else the CPUs they leave (:func:`choose_threads`)."""
    if request != AUTO:
        return request
    choice = choose_threads()
    return None if choice.busy == 0 else choice.threads


@dataclasses.dataclass(frozen=True)
class _Facts:
    """What a worker reports once its model is loaded.

    Attributes:
        methods: those of :data:`METHODS` the model has.
        model: what the result records of it.
        threads: the torch thread count the worker set (None: the plugin does not use torch).
        forks: whether the worker is a template that forks a process for each pass (:func:`serve`).
    """

    methods: frozenset[str]
    model: ModelFacts
    threads: int | None
    forks: bool

    @classmethod
    def read(cls, value: object) -> _Facts:
        """The facts in a worker's reply; :class:`_Failure` where they are not what a loaded
        model can report."""
        if not isinstance(value, dict) or not isinstance(value.get("methods"), list):
            raise _Failure.unreadable("no facts of the model")
        methods = frozenset(value["methods"])
        parameters, checkpoint, threads, forks = (
            value.get(key) for key in ("num_parameters", "checkpoint", "threads", "forks")
        )
        if not methods <= set(METHODS) or not ("score_stream" in methods or {"reset", "score"} <= methods):
            raise _Failure.unreadable("the model's methods")
        if not (parameters is None or _is_count(parameters, least=0)) or not (
            threads is None or _is_count(threads, least=1)
        ):
            raise _Failure.unreadable("a count")
        if not (checkpoint is None or isinstance(checkpoint, str)) or not isinstance(forks, bool):
            raise _Failure.unreadable("the checkpoint or the passes' processes")
        return cls(methods, ModelFacts(parameters, checkpoint), threads, forks)


def _is_count(value: object, *, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


class _Failure(Exception):
    """A call into a worker that did not return: why, in words that follow the call, and the
    plugin's traceback when it raised."""

    def __init__(self, reason: str, traceback: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.traceback = traceback

    @classmethod
    def unreadable(cls, what: str) -> _Failure:
        return cls(f"sent a reply the harness cannot read ({what})")


class _Worker:
    """A worker process serving one pass, the harness's end of its connection and what it
    reported of its model (``facts``)."""

    def __init__(
        self, process: BaseProcess, connection: Connection, plugin: str, limits: WorkerLimits
    ) -> None:
        self._process = process
        self._connection = connection
        self._plugin = plugin
        self._closed = False
        self.limits = limits
        self.facts: _Facts

    @classmethod
    def launch(cls, load: PluginLoad, limits: WorkerLimits) -> _Worker:
        """A worker process of a fresh interpreter, which imports ``load``'s plugin and waits to
        be asked to load its model (:meth:`loaded`)."""
        context = multiprocessing.get_context("spawn")
        harness_end, worker_end = context.Pipe()
        process = context.Process(target=serve, args=(os.getpid(), worker_end, load), name="plugin worker")
        process.start()
        worker_end.close()  # the worker's: the connection reads as closed once the worker has gone
        return cls(process, harness_end, load.plugin, limits)

    def loaded(self) -> _Worker:
        """This worker with its model loaded; when it cannot be, the worker is ended and the
        error raised: the plugin's own one-line error, or a :class:`PluginError` saying why."""
        try:
            header, _ = self.request(("load",), seconds=self.limits.load_seconds, max_bytes=REPLY_ALLOWANCE)
            self.facts = _Facts.read(_answer(header))
        except _Failure as failure:
            self.close(graceful=False)
            _log_traceback(f"plugin {self._plugin!r}: loading it", failure)
            raise PluginError(f"plugin {self._plugin!r}: loading it {failure.reason}") from None
        except BaseException:
            self.close(graceful=False)
            raise
        return self

    @contextlib.contextmanager
    def forked_pass(self) -> Iterator[None]:
        """Within the context, this worker, a template (:func:`serve`), answers through a process
        forked from it for the pass, which ends with the context. An error in the context ends
        the template (its forked process dies with it)."""
        try:
            self._confirmed(("pass", ()), "ok", "forking a process for a pass")
            yield
            self._confirmed(("end", ()), "ended", "ending a pass's process")
        except BaseException:
            self.close(graceful=False)
            raise

    def _confirmed(self, message: tuple[Any, ...], key: str, doing: str) -> None:
        """Send the template ``message`` and read its reply, which holds ``key``; a
        :class:`PluginError` saying what went wrong ``doing`` it otherwise."""
        try:
            header, _ = self.request(message, seconds=self.limits.call_seconds, max_bytes=REPLY_ALLOWANCE)
            if key not in header:
                _answer(header)
                raise _Failure.unreadable(f"no {key!r}")
        except _Failure as failure:
            raise PluginError(f"plugin {self._plugin!r}: {doing}: it {failure.reason}") from None

    def model(self, name: str, vocab_size: int) -> Model:
        """The proxy of the worker's model; ``name`` names the plugin in messages."""
        proxy: Any = _WorkerModel(self, name, vocab_size)
        return proxy

    def request(
        self, message: tuple[Any, ...], *, seconds: float, max_bytes: int
    ) -> tuple[dict[str, Any], bytes]:
        """Send ``message`` and return the reply's header and the bytes after it; a
        :class:`_Failure` when the worker fails to answer within ``seconds`` and ``max_bytes``."""
        try:
            self._connection.send(message)
        except OSError:  # the worker has gone
            raise _Failure(self._ended()) from None
        return self.receive(seconds=seconds, max_bytes=max_bytes)

    def receive(self, *, seconds: float, max_bytes: int) -> tuple[dict[str, Any], bytes]:
        """The next reply (see :func:`request`), killing the worker when it gives none within
        ``seconds``."""
        with _Watchdog(self._process, seconds) as watchdog:
            try:
                payload = self._connection.recv_bytes(max_bytes)
            except (EOFError, OSError) as error:
                raise (
                    watchdog.timed_out() if watchdog.fired else _Failure(self._no_reply(error, max_bytes))
                ) from None
        if watchdog.fired:  # the reply came as the limit passed, and the worker is gone
            raise watchdog.timed_out()
        return _header(payload)

    def _no_reply(self, error: BaseException, max_bytes: int) -> str:
        """Why no reply came (``error``, what reading it raised), in words that follow the call."""
        if isinstance(error, OSError) and error.errno is None:  # "bad message length"
            self._process.kill()
            return f"sent a reply of over {max_bytes:,} bytes, more than this call can need"
        return self._ended()

    def _ended(self) -> str:
        """How the worker ended, in words that follow the call it did not answer."""
        self._process.join(self.limits.exit_seconds)
        code = self._process.exitcode
        if code is None:
            self._process.kill()
            return "closed its worker's connection to the harness"
        return _ending(code)

    def close(self, *, graceful: bool) -> None:
        """End the worker and reap it: ``graceful``, it is asked to exit (its connection closed)
        and killed if it has not within the limit; otherwise killed at once. Once closed, it
        stays so."""
        if self._closed:
            return
        self._closed = True
        try:
            if not graceful:
                self._process.kill()
            self._connection.close()
            self._process.join(self.limits.exit_seconds)
        finally:
            if self._process.exitcode is None:
                self._process.kill()
                self._process.join()
            self._process.close()

    def __enter__(self) -> _Worker:
        return self

    def __exit__(self, error_type: type[BaseException] | None, *_: object) -> None:
        self.close(graceful=error_type is None)


class _Watchdog:
    """Within its context, kills ``process`` once ``seconds`` have passed; ``fired``: whether
    it did."""

    def __init__(self, process: BaseProcess, seconds: float) -> None:
        self.fired = False
        self._process = process
        self._seconds = seconds
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        self._process.kill()

    def timed_out(self) -> _Failure:
        """The call's failure once the watchdog has fired."""
        return _Failure(f"gave no answer within {self._seconds:,g} s, the worker's limit for this call")

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()


def _ending(code: int) -> str:
    """How a process that ended with ``code`` (:attr:`multiprocessing.Process.exitcode`: minus the
    signal's number when killed by one) ended, in words that follow the call it did not answer."""
    if code < 0:
        return f"ended its worker process: killed by {_signal_name(-code)}"
    return f"ended its worker process (exit status {code})"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _header(payload: bytes) -> tuple[dict[str, Any], bytes]:
    """A reply's header (its first line, a JSON object) and the bytes after it."""
    line, _, body = payload.partition(b"\n")
    try:
        header = bounded_json.loads(line)
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise _Failure.unreadable("no JSON object")
    return header, body


def _answer(header: dict[str, Any]) -> Any:
    """What a reply's header says the call returned; the plugin's one-line error, or a
    :class:`_Failure`, when it did not return."""
    if "ok" in header:
        return header["ok"]
    if "scores" in header:
        return header["scores"]
    kind, message = header.get("error"), header.get("message")
    if kind in ONE_LINE_ERRORS and isinstance(message, str):
        raise ONE_LINE_ERRORS[kind](message)
    if _is_count(header.get("ended"), least=-255):  # a template's process forked for a pass ended
        raise _Failure(_ending(header["ended"]))
    if isinstance(header.get("exit"), str):
        raise _Failure(f"called sys.exit({header['exit']}); a plugin returns its scores or raises")
    raised, trace = header.get("raised"), header.get("traceback")
    if isinstance(raised, str) and isinstance(trace, str):
        raise _Failure(f"raised {raised}", trace)
    raise _Failure.unreadable("no answer")


def _log_traceback(call: str, failure: _Failure) -> None:
    """The line naming ``call`` and the plugin's traceback in the log (an error), when it raised."""
    if failure.traceback is not None:
        logger.error("%s raised an exception (traceback below)\n%s", call, failure.traceback.rstrip("\n"))


class _WorkerModel:
    """The model of a worker process, as the harness sees it: ``num_parameters``, ``checkpoint``
    and exactly the plugin model's methods of :data:`METHODS`, each a call into the worker."""

    def __init__(self, worker: _Worker, name: str, vocab_size: int) -> None:
        self._worker = worker
        self._name = name
        self._vocab_size = vocab_size
        self._limits = worker.limits
        self.num_parameters = worker.facts.model.num_parameters
        self.checkpoint = worker.facts.model.checkpoint
        for method in worker.facts.methods:  # instance attributes: absent where the model has none
            setattr(self, method, getattr(self, f"_{method}"))

    def _reset(self, batch_size: int) -> None:
        self._call("reset", (batch_size,), seconds=self._limits.call_seconds, array_bytes=0)

    def _score(self, chunk: Chunk) -> WorkerScores:
        return self._scores("score", chunk)

    def _score_stream(self, stream: Chunk) -> WorkerScores:
        return self._scores("score_stream", stream)

    def _result_metadata(self) -> Any:
        return self._call("result_metadata", (), seconds=self._limits.call_seconds, array_bytes=0)[0]

    def _scores(self, method: str, chunk: Chunk) -> WorkerScores:
        """The worker's scores of ``chunk``: ``[B, T]`` target log-probabilities and, when asked
        for and given, the ``[K, V]`` distributions, as float64 arrays."""
        requested = 0 if chunk.distribution_mask is None else int(chunk.distribution_mask.sum())
        shapes = (chunk.mask.shape, (requested, self._vocab_size))
        sizes = [int(np.prod(shape)) for shape in shapes]
        arguments = (chunk.inputs, chunk.targets, chunk.mask, chunk.distribution_mask)
        seconds = self._limits.scoring_seconds(chunk.mask.size)
        scores, body = self._call(method, arguments, seconds=seconds, array_bytes=8 * sum(sizes))
        if not isinstance(scores, dict) or not all(
            isinstance(scores.get(key), bool) for key in ("distributions", "on_accelerator")
        ):
            raise self._failed(method, _Failure.unreadable("no scores"))
        given = scores["distributions"] and requested > 0
        if len(body) != 8 * (sizes[0] + sizes[1] * given):
            raise self._failed(method, _Failure.unreadable(f"{len(body):,} bytes of scores"))
        values = np.frombuffer(body, dtype="<f8")
        distributions = values[sizes[0] :].reshape(shapes[1]) if given else None
        return WorkerScores(
            values[: sizes[0]].reshape(shapes[0]), distributions, on_accelerator=scores["on_accelerator"]
        )

    def _call(
        self, method: str, arguments: tuple[Any, ...], *, seconds: float, array_bytes: int
    ) -> tuple[Any, bytes]:
        """Call the worker model's ``method`` with ``arguments``: what it returned, and the bytes
        of the arrays after the reply's header (at most ``array_bytes``)."""
        try:
            header, body = self._worker.request(
                (method, arguments), seconds=seconds, max_bytes=REPLY_ALLOWANCE + array_bytes
            )
            refused = header.get("refused")
            if isinstance(refused, str):  # what it returned is no scores: the harness's message
                raise PluginError(f"{self._name}: {refused}")
            return _answer(header), body
        except _Failure as failure:
            raise self._failed(method, failure) from None

    def _failed(self, method: str, failure: _Failure) -> CallFailed:
        return CallFailed(f"{self._name}: {method}() {failure.reason}", failure.reason, failure.traceback)


# ---- the worker process ------------------------------------------------------------------------


def serve(parent: int, connection: Connection, load: PluginLoad) -> None:
    """The worker process, started by process ``parent``: import the plugin at once, load its
    model when the harness asks (its first pass opens), report what the harness records of it,
    then answer each request on ``connection`` until the harness closes it or ends the pass.

    **Forking a process for each pass** (``load.fork_passes``: the harness's process on a CPU).
    Forking a process whose OpenMP threads have started leaves the copy hanging at its first
    parallel operation (GNU OpenMP keeps no record of the fork). So torch, where installed, is
    imported first and told to use one thread while the plugin loads; where the factory leaves it
    so, the worker is a template: it reports ``forks``, never scores, and for each pass forks a
    process (:func:`_fork_each_pass`) that takes ``--threads`` (or torch's own count), answers the
    pass's calls and ends with it. Each pass thus starts from the loaded model and nothing else,
    as a fresh worker would, without a model load of its own. A factory that set torch's threads
    itself keeps the worker a plain one: it serves one pass and the harness starts one per pass.
    The plugin's log messages are lines on the worker's stderr, as a command's are
    (:func:`~wikitext_toolkit_core.cli.messages_on_stderr`).
    """
    with messages_on_stderr():
        _serve(parent, connection, load)


def _serve(parent: int, connection: Connection, load: PluginLoad) -> None:
    """:func:`serve`, its messages on stderr."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the harness's, which stops the worker
    end_with_parent(parent)
    if load.retain_memory:
        retain_freed_memory()
    torch_threads = _one_torch_thread() if load.fork_passes else None
    try:
        imported: tuple[str, Callable[..., Model]] | BaseException = load_factory(load.plugin)
    except (Exception, SystemExit) as error:
        imported = error  # said when the model is asked for
    _next_request(connection)
    try:
        if isinstance(imported, BaseException):
            raise imported
        model, vocab_size, facts = _loaded(load, *imported)
    except (Exception, SystemExit) as error:
        connection.send_bytes(_failure_reply(error))
        _exit()
    connection.send_bytes(_reply({"ok": facts}))
    if facts["forks"]:
        _fork_each_pass(connection)
        _set_pass_threads(load.threads if isinstance(load.threads, int) else torch_threads)
        connection.send_bytes(_reply({"ok": None}))
    while True:
        method, arguments = _next_request(connection)
        if method == "end":  # the pass of a forked process is over
            _exit()
        connection.send_bytes(_answered(model, method, arguments, vocab_size))


def _one_torch_thread() -> int | None:
    """Import torch, when installed, and give it one thread; returns the count it had chosen
    (None: no torch)."""
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError:
        return None
    threads: int = torch.get_num_threads()
    torch.set_num_threads(1)
    return threads


def _on_one_torch_thread() -> bool:
    """Whether torch, if imported, still uses one thread (:func:`_one_torch_thread`)."""
    torch: Any = sys.modules.get("torch")
    return torch is None or torch.get_num_threads() == 1


def _set_pass_threads(threads: int | None) -> None:
    """Give torch, if imported, ``threads`` (None: leave it as it is)."""
    torch: Any = sys.modules.get("torch")
    if torch is not None and threads is not None:
        torch.set_num_threads(threads)


def _fork_each_pass(connection: Connection) -> None:
    """A template's loop: for each pass the harness opens, fork a process to serve it, which
    returns from here, and, once it has ended, tell the harness its exit code. The template ends
    when the harness closes ``connection``; each process forked from it dies with it."""
    template = os.getpid()
    while True:
        _next_request(connection)
        sys.stdout.flush()
        sys.stderr.flush()
        forked = os.fork()
        if forked == 0:
            end_with_parent(template)
            return
        _, status = os.waitpid(forked, 0)
        try:
            connection.send_bytes(_reply({"ended": os.waitstatus_to_exitcode(status)}))
        except OSError:  # the harness has gone
            _exit()


def _next_request(connection: Connection) -> tuple[Any, ...]:
    """The harness's next request; the worker ends when there is none (its pass is over)."""
    try:
        return connection.recv()
    except EOFError:
        _exit()


def _exit() -> NoReturn:
    """End the worker now, its output flushed, without waiting on the plugin's threads."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _loaded(
    load: PluginLoad, identity: str, factory: Callable[..., Model]
) -> tuple[Model, int, dict[str, Any]]:
    """The model that the plugin's ``factory`` (its ``identity``: :func:`load_factory`) makes as
    ``load`` says, the dataset's vocabulary size and the facts the harness records, ``forks``
    among them: whether this worker is a template (:func:`serve`), whose torch keeps one thread
    until a process is forked for a pass."""
    dataset = load.dataset.load()
    with _dropped_output() if load.quiet_load else contextlib.nullcontext():
        model = create_model(
            factory,
            identity,
            dataset,
            device=load.device,
            checkpoint=load.checkpoint,
            model_args=load.model_args,
        )
    forks = load.fork_passes and _on_one_torch_thread()
    if forks:  # the threads are set in each pass's process
        threads = load.threads if isinstance(load.threads, int) else None
    else:
        threads = None if load.threads is None else set_model_threads(load.threads)
    facts = model_facts(model, identity)
    return (
        model,
        len(dataset.vocab),
        {
            "methods": [method for method in METHODS if callable(getattr(model, method, None))],
            "num_parameters": facts.num_parameters,
            "checkpoint": facts.checkpoint,
            "threads": threads,
            "forks": forks,
        },
    )


@contextlib.contextmanager
def _dropped_output() -> Iterator[None]:
    """Within the context, what Python code prints to stdout and stderr is dropped."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


class _Refused(Exception):
    """What the plugin returned is not scores; the message is the harness's, without the name."""


def _answered(model: Model, method: str, arguments: tuple[Any, ...], vocab_size: int) -> bytes:
    """The reply to a request: ``method`` of ``model`` called with ``arguments``."""
    try:
        if method in ("score", "score_stream"):
            chunk = Chunk(*arguments)
            return _scores_reply(getattr(model, method)(chunk), chunk, method, vocab_size)
        value = getattr(model, method)(*arguments)
        problem = metadata_problem(value) if method == "result_metadata" else None
        if problem:
            raise _Refused(problem)
        return _reply({"ok": None if method == "reset" else value})
    except (Exception, SystemExit) as error:
        return _failure_reply(error)


def _scores_reply(scores: object, chunk: Chunk, method: str, vocab_size: int) -> bytes:
    """The reply holding ``scores``, what ``method`` returned for ``chunk``, as float64 arrays
    of the shapes the harness asked for."""
    if not isinstance(scores, ChunkScores):
        raise _Refused(not_chunk_scores(scores, method))
    target_log_probs = _float64(scores.target_log_probs, "target_log_probs")
    problem = target_shape_problem(target_log_probs.shape, chunk.mask.shape)
    arrays = [target_log_probs]
    if not problem and chunk.distribution_mask is not None and scores.distributions is not None:
        distributions = _float64(scores.distributions, "distributions")
        problem = distribution_shape_problem(
            distributions.shape, (int(chunk.distribution_mask.sum()), vocab_size)
        )
        arrays.append(distributions)
    if problem:
        raise _Refused(problem)
    header = {"scores": {"distributions": len(arrays) > 1, "on_accelerator": scores_on_accelerator(scores)}}
    return _reply(header, *arrays)


def _float64(values: object, what: str) -> np.ndarray:
    """:func:`harness.evaluate._as_float64` of ``values``; its refusal as :class:`_Refused`."""
    try:
        return _as_float64(values, what)
    except PluginError as error:
        raise _Refused(str(error)) from None


def _reply(header: dict[str, Any], *arrays: np.ndarray) -> bytes:
    """A reply: ``header`` as a line of JSON, then ``arrays`` as raw little-endian float64."""
    line = json.dumps(header, allow_nan=False).encode("ascii") + b"\n"
    return line + b"".join(array.astype("<f8", copy=False).tobytes() for array in arrays)


def _failure_reply(error: BaseException) -> bytes:
    """The reply saying how a call failed: ``error`` raised in the worker."""
    if isinstance(error, _Refused):
        return _reply({"refused": str(error)[:MAX_MESSAGE_CHARS]})
    if isinstance(error, SystemExit):
        return _reply({"exit": repr(error.code)[:MAX_MESSAGE_CHARS]})
    for kind, one_line in ONE_LINE_ERRORS.items():
        if isinstance(error, one_line):
            return _reply({"error": kind, "message": str(error)[:MAX_MESSAGE_CHARS]})
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return _reply(
        {"raised": describe_exception(error)[:MAX_MESSAGE_CHARS], "traceback": trace[-MAX_TRACEBACK_CHARS:]}
    )
