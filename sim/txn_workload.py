"""A simulated run's transactional workload (``SimOptions.transactions``): start, zombies, the end, ``txn``.

As chaos/txn_run.py: the pipelines (sim/txn_clients.py) read the run's input topic, which its producers
write, and write ``txn-out``; ``readers`` read_committed consumers read the output all along.  A pipeline
that ends fenced is replaced by the next instance of its transactional id a second later.  With
``zombie_every_ms``, now and then (seeded) a pipeline is told to freeze before its next commit; when it gets
there its successor starts, and once the successor holds the id (and ``zombie_ms`` more) the frozen one
tries to commit.  With ``crash_every_ms``, now and then (seeded) a pipeline process dies where it is (an
operation it had under way stays open: unknown), and its successor starts a second later, as a supervisor
would restart it.  The end: the group's committed offsets (stable) reach the input's end (``drained``), the
pipelines finish the transaction under way and stop, the readers stop, each output partition is read
read_committed to its last stable offset (final ``poll``s), the group's offsets are fetched a last time;
:meth:`SimTxnWorkload.txn` is judge/checks_txn.py's ``txn``.
"""
from __future__ import annotations

import random
from typing import Any, Callable

from kafkacommon import errors
from sim.clients import tp_key
from sim.txn_clients import CommittedFilter, SimTxnPipeline, SimTxnReader, TxnClient

OUTPUT = "txn-out"
GROUP = "eos"
TRANSACTIONAL_ID = "eos"
REPLACE_AFTER_MS = 1000.0
DRAIN_MS = 90_000.0      # as chaos/txn_run.py: a marker request lost to a partition waits out request.timeout.ms


class SimTxnWorkload:
    def __init__(self, run, input_topic: str, partitions: int, pipelines: int, *, max_records: int = 10,
                 timeout_ms: int = 10_000, readers: int = 1, poll_interval_ms: float = 100.0,
                 zombie_every_ms: tuple[int, int] | None = None, zombie_ms: int = 2000,
                 crash_every_ms: tuple[int, int] | None = None) -> None:
        self.run = run
        self.world = run.world
        self.input, self.output, self.group = input_topic, OUTPUT, GROUP
        self.transactional_id = TRANSACTIONAL_ID
        self.partitions_in = self.partitions_out = partitions
        self.pipelines = pipelines
        self.max_records, self.timeout_ms, self.poll_interval_ms = max_records, timeout_ms, poll_interval_ms
        self.zombie_every_ms, self.zombie_ms = zombie_every_ms, zombie_ms
        self.crash_every_ms = crash_every_ms
        self.crashes = 0
        self.current: dict[int, SimTxnPipeline] = {}
        self.retired: list[SimTxnPipeline] = []
        self.instances = [0] * pipelines
        self.readers = [SimTxnReader(run, self) for _ in range(readers)]
        self.zombies = 0
        self.rng = random.Random(run.world.rng.getrandbits(64))
        self.stopping = False
        self.quiet = False
        self.doc: dict[str, Any] = {"input": self.input, "output": self.output, "group": self.group}

    def transactional_ids(self) -> list[str]:
        return [f"{self.transactional_id}-{i}" for i in range(self.pipelines)]

    # ------------------------------------------------------------------ running

    def start(self) -> None:
        for i in range(self.pipelines):
            self._new(i)
        for r in self.readers:
            r.start()
        if self.zombie_every_ms is not None:
            self.world.on_node("client", self.rng.randint(*self.zombie_every_ms), self._zombie)
        if self.crash_every_ms is not None:
            self.world.on_node("client", self.rng.randint(*self.crash_every_ms), self._crash)

    def _new(self, index: int) -> SimTxnPipeline:
        p = self.current[index] = SimTxnPipeline(self.run, self, index, self.instances[index])
        self.instances[index] += 1
        p.start()
        return p

    def ended(self, pipe: SimTxnPipeline) -> None:
        """A pipeline ended fenced: the current one of its id is replaced; a zombie is not."""
        self.retired.append(pipe)
        if self.current.get(pipe.index) is pipe and not self.stopping:
            self.world.on_node("client", REPLACE_AFTER_MS, self._replace, pipe)

    def _replace(self, pipe: SimTxnPipeline) -> None:
        if self.current.get(pipe.index) is pipe and not self.stopping:
            self._new(pipe.index)

    def quiesce(self) -> None:
        """The run's end phase begins: no more zombies or crashes (as every fault is healed)."""
        self.quiet = True

    def _zombie(self) -> None:
        if self.stopping or self.quiet:
            return
        self.current[self.rng.randrange(self.pipelines)].freeze = True
        self.world.on_node("client", self.rng.randint(*self.zombie_every_ms), self._zombie)

    def _crash(self) -> None:
        if self.stopping or self.quiet:
            return
        pipe = self.current[self.rng.randrange(self.pipelines)]
        if not pipe.stopped:
            pipe.crash()
            self.crashes += 1
            self.retired.append(pipe)
            self.world.on_node("client", REPLACE_AFTER_MS, self._replace, pipe)
        self.world.on_node("client", self.rng.randint(*self.crash_every_ms), self._crash)

    def take_over(self, zombie: SimTxnPipeline) -> SimTxnPipeline:
        """``zombie`` froze before its commit: its successor starts now (its InitProducerId fences it)."""
        self.zombies += 1
        self.retired.append(zombie)
        return self._new(zombie.index)

    def commits(self) -> int:
        return sum(p.commits for p in set(self.current.values()) | set(self.retired))

    # ------------------------------------------------------------------ the end

    def end(self, ends: dict[int, int], wait: Callable[[Callable[[], bool], float, float], bool]) -> None:
        """``ends``: the input's partitions' ends (the final reads'); ``wait(cond, timeout_ms, step_ms)`` runs
        the world until ``cond()``."""
        checker = TxnClient(self.run)
        last: dict[str, Any] = {"offsets": None, "asked": False}

        def poll_committed() -> bool:
            if not last["asked"]:
                last["asked"] = True

                def got(offsets: dict | None) -> None:
                    last["asked"] = False
                    if offsets is not None:
                        last["offsets"] = offsets
                checker.fetch_committed(self.group, [(self.input, p) for p in ends], got)
            got_ = last["offsets"]
            return got_ is not None and all(got_.get((self.input, p), -1) >= e for p, e in ends.items())

        drained = wait(poll_committed, DRAIN_MS, 200.0)
        self.stopping = True
        for p in self.current.values():
            p.stopping = True
        wait(lambda: all(p.stopped for p in self.current.values()), 30_000, 100.0)
        for p in list(self.current.values()) + self.retired + self.readers:
            p.abandon()
        finals = [self._final_read(p, wait) for p in range(self.partitions_out)]
        last["offsets"], last["asked"] = None, False
        wait(lambda: poll_committed() or last["offsets"] is not None, 10_000, 200.0)
        committed = last["offsets"] or {}
        self.doc.update(drained=drained, final_reads_ok=all(finals), zombies=self.zombies, crashes=self.crashes,
                        commits=self.commits(),
                        instances=list(self.instances),
                        final_committed={tp_key(t, p): o for (t, p), o in sorted(committed.items()) if o >= 0},
                        input_ends={tp_key(self.input, p): e for p, e in sorted(ends.items())})

    def _final_read(self, p: int, wait: Callable[[Callable[[], bool], float, float], bool]) -> bool:
        """One output partition read read_committed from 0 to its last stable offset (the first answer's), a
        final ``poll``."""
        reader = TxnClient(self.run)
        value = {"topic": self.output, "partition": p, "isolation": "read_committed"}
        op = self.run.history.invoke(self.run.procs(), "poll", value, final=True)
        state: dict[str, Any] = {"offset": 0, "end": None, "asking": False, "records": []}
        flt = CommittedFilter()

        def step() -> bool:
            if state["end"] is not None and state["offset"] >= state["end"]:
                return True
            if not state["asking"]:
                state["asking"] = True

                def got(ans: Any) -> None:
                    state["asking"] = False
                    if ans is None or ans[0] != errors.NONE:
                        return
                    _code, _hw, lso, recs, aborted = ans
                    if state["end"] is None:
                        state["end"] = lso
                    recs = [r for r in recs if r[0] < state["end"]]
                    if not recs or recs[0][0] != state["offset"]:
                        return
                    state["records"] += [[self.output, p, o, (v or b"").decode()] for o, _k, v in flt.filter(recs, aborted)]
                    state["offset"] = recs[-1][0] + 1
                reader.read(self.output, p, state["offset"], got)
            return False
        ok = wait(step, 20_000, 50.0)
        if ok:
            self.run.history.complete(op, "ok", dict(value, records=state["records"], end=state["end"]), final=True)
        else:
            self.run.history.complete(op, "info", dict(value, records=state["records"]), error="timed out",
                                      final=True)
        return ok

    def txn(self) -> dict[str, Any]:
        return dict(self.doc)
