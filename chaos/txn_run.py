"""A chaos run's transactional workload from start to end (``workload.transactions``): the pipelines, the
read_committed readers, the zombies, and the end: drain, stop, final reads, ``txn.json``.

* **Start**: one pipeline process per transactional id (chaos/txn_workload.py), and the readers.  A pipeline
  process that ends on a fatal error (fenced) is replaced by a new one (the next instance of its
  transactional id) a second later; so is one hung in a client call past its timeout
  (chaos/txn_workload.py's ``ConfluentPipeline.hung``: librdkafka issues #5456 and #5511), which is abandoned
  to its call, as an application's watchdog would restart it.  The successor's InitProducerId fences it and
  aborts its open transaction; its consumer left the group once ``max.poll.interval.ms`` passed.
* **Zombies** (``zombie.interval.ms``, confluent-kafka): every so often (seeded) a pipeline (drawn among
  those that committed in the last 3 s; with none, or when it did not reach its commit in 10 s, another try
  a second later) is frozen before its next commit, a new process with its transactional id starts (its
  InitProducerId fences the old one), and once the new one's InitProducerId succeeded (the old one's open
  transaction aborted) and ``zombie.ms`` more, the old one is released: its commit must be refused.
* **End** (the runner's end phase, producers stopped and faults healed): wait until the group's committed
  offsets reach the input's end (``drained``), stop the pipelines and readers, read every output partition
  read_committed up to its last stable offset (final ``poll`` operations), fetch the group's offsets once
  more, and write ``txn.json`` (the ``txn`` option of judge/checkers.py: judge/checks_txn.py).
"""
from __future__ import annotations

import json
import logging
import random
import threading
import time
from pathlib import Path
from typing import Any

from chaos.txn_scenario import TxnSpec
from chaos.txn_workload import ConfluentPipeline, JavaPipeline, OutputReader, final_output_read
from chaos.workload import Processes, Worker
from client.admin import GroupAdmin
from util.waiting import wait_for

log = logging.getLogger(__name__)


def load_txn(run_dir: Path) -> dict[str, Any] | None:
    """A finished run's ``txn.json`` (None: the run had no transactional workload)."""
    try:
        return json.loads((Path(run_dir) / "txn.json").read_text())
    except FileNotFoundError:
        return None


class TxnRun:
    def __init__(self, spec: TxnSpec, out: Path, bootstrap: str, history, procs: Processes,
                 partitions_in: int, partitions_out: int, seed: int) -> None:
        self.spec, self.out, self.bootstrap = spec, Path(out), bootstrap
        self.history, self.procs = history, procs
        self.partitions_in, self.partitions_out = partitions_in, partitions_out
        self.rng = random.Random(f"{seed}:transactions")
        self.stop_pipelines, self.stop_readers = threading.Event(), threading.Event()
        self.pipelines: dict[int, Worker] = {}            # index -> its current process
        self.retired: list[Worker] = []
        self.readers = [OutputReader(history, procs, bootstrap, spec, partitions_out, i, self.stop_readers)
                        for i in range(spec.readers)]
        self.zombies = 0
        self.stuck: list[str] = []                        # pipelines that did not stop in time (a client hung)
        self.hung: list[str] = []                         # pipelines abandoned to a hung client call, replaced
        self.instances = [0] * spec.pipelines
        self._keeper = threading.Thread(target=self._keep, daemon=True, name="txn-keeper")
        self._lock = threading.Lock()

    def _new(self, index: int) -> Worker:
        kind = JavaPipeline if self.spec.client == "java" else ConfluentPipeline
        w = kind(self.history, self.procs, self.bootstrap, self.spec, index, self.instances[index],
                 self.partitions_out, self.stop_pipelines)
        self.instances[index] += 1
        w.start()
        return w

    def start(self) -> None:
        for i in range(self.spec.pipelines):
            self.pipelines[i] = self._new(i)
        for r in self.readers:
            r.start()
        self._keeper.start()

    def _keep(self) -> None:
        """Replace pipelines that ended (fenced), and make zombies on schedule."""
        z = self.spec.zombie_interval_ms
        next_zombie = None if z is None else self.rng.uniform(z.lo, z.hi) / 1000
        waited = 0.0
        while not self.stop_pipelines.wait(0.5):
            waited += 0.5
            self._replace_ended(time.monotonic())
            if next_zombie is not None and waited >= next_zombie:
                # drawn among the pipelines committing now: one failing over, or hung in a client call, would not
                # reach a commit to freeze at; with none, or when the one drawn did not get there, another try a
                # second later rather than a whole interval later
                live = self._committing()
                made = bool(live) and self._zombie(live[self.rng.randrange(len(live))])
                waited, next_zombie = 0.0, (self.rng.uniform(z.lo, z.hi) if made else 1000.0) / 1000

    def _replace_ended(self, now: float) -> None:
        """Start a successor for each pipeline process that ended (fenced), or that is hung in a client call at
        ``now`` (``time.monotonic()``; it is abandoned to its call)."""
        with self._lock:
            for i, w in list(self.pipelines.items()):
                if self.stop_pipelines.is_set():
                    return
                if not w.is_alive():
                    self.retired.append(w)
                    self.pipelines[i] = self._new(i)
                elif isinstance(w, ConfluentPipeline) and w.hung(now):
                    log.warning("%s: a client call is hung past its timeout: abandoned, a new instance starts",
                                w.name)
                    w.abandon()
                    self.hung.append(w.name)
                    self.retired.append(w)
                    self.pipelines[i] = self._new(i)

    def _committing(self, within_s: float = 3.0) -> list[int]:
        """The indexes of the confluent-kafka pipelines that committed in the last ``within_s``."""
        now = time.monotonic()
        with self._lock:
            return [i for i, w in sorted(self.pipelines.items()) if isinstance(w, ConfluentPipeline)
                    and w.is_alive() and w.last_commit >= 0 and now - w.last_commit <= within_s]

    def _zombie(self, index: int) -> bool:
        """Freeze pipeline ``index`` before its next commit and start its successor; False when it did not
        freeze within 10 s (the attempt is called off: it carries on)."""
        with self._lock:
            old = self.pipelines[index]
            if not isinstance(old, ConfluentPipeline) or not old.is_alive():
                return False
            # a called-off attempt left these set: a new one must wait for this freeze and this release
            old.frozen.clear()
            old.release.clear()
            old.freeze.set()
        if not old.frozen.wait(10) or self.stop_pipelines.is_set():
            old.freeze.clear()
            old.release.set()
            return False
        with self._lock:
            self.retired.append(old)
            self.pipelines[index] = new = self._new(index)   # its InitProducerId fences the frozen one
        self.zombies += 1
        # the zombie stays frozen until the newer process holds the id (InitProducerId waits for the zombie's
        # transaction to be aborted), then zombie.ms more: its commit comes after the fence, and is judged
        deadline = time.monotonic() + 60
        while not new.initialized.is_set() and new.is_alive() and time.monotonic() < deadline \
                and not self.stop_pipelines.is_set():
            new.initialized.wait(0.2)
        self.stop_pipelines.wait(self.spec.zombie_ms / 1000)
        old.release.set()                                 # it tries to commit: refused, then it ends
        return True

    def end(self, cluster, input_ends: dict[tuple[str, int], int], timeout_s: float = 90.0) -> None:
        admin = GroupAdmin(cluster, timeout_s=5.0)
        drained = True

        def caught_up() -> bool:
            got = admin.committed(self.spec.group)
            return all(got.get(tp, -1) >= end for tp, end in input_ends.items())
        try:
            wait_for(caught_up, timeout_s, f"group {self.spec.group} to commit its transactions up to the input's end",
                     interval=0.5)
        except TimeoutError:
            drained = False
        self.stop()
        finals = [final_output_read(self.history, self.procs, self.bootstrap, self.spec, p)
                  for p in range(self.partitions_out)]
        try:
            committed = {f"{t}/{p}": o for (t, p), o in admin.committed(self.spec.group).items() if t == self.spec.input}
        except Exception as e:
            log.info("the group's final offsets could not be fetched: %s", e)
            committed = {}
        doc = {"input": self.spec.input, "output": self.spec.output, "group": self.spec.group,
               "transactional_ids": self.spec.transactional_ids(), "client": self.spec.client,
               "drained": drained, "final_reads_ok": all(finals), "final_committed": committed,
               "input_ends": {f"{t}/{p}": o for (t, p), o in input_ends.items()}, "zombies": self.zombies,
               "instances": list(self.instances), "commits": self.commits(), "stuck": list(self.stuck),
               "hung": list(self.hung)}
        (self.out / "txn.json").write_text(json.dumps(doc, indent=2) + "\n")

    def commits(self) -> int:
        return sum(getattr(w, "commits", 0) for w in list(self.pipelines.values()) + self.retired)

    def stop(self, timeout_s: float = 45.0) -> None:
        """Stop every pipeline and reader.  A pipeline still in a client call after ``timeout_s`` (a client that
        hung: librdkafka's transactional calls can wait for a coordinator past their own timeout) is left
        running (its thread is a daemon) and named in ``stuck``."""
        if self.stop_readers.is_set():
            return
        self.stop_pipelines.set()
        for w in list(self.pipelines.values()) + self.retired:
            if isinstance(w, ConfluentPipeline):
                w.release.set()
        if self._keeper.is_alive():
            self._keeper.join(10)
        deadline = time.monotonic() + timeout_s
        for w in list(self.pipelines.values()) + self.retired:   # one abandoned as hung is not waited for
            w.join(0.1 if w.name in self.hung else max(0.1, deadline - time.monotonic()))
            if w.is_alive():
                self.stuck.append(w.name)
        self.stop_readers.set()
        for r in self.readers:
            r.join(30)

    def workers(self) -> list[Worker]:
        return list(self.pipelines.values()) + self.retired + self.readers


def txn_results(txn: dict[str, Any], result: Any) -> dict[str, Any]:
    """results.json's ``transactions``: the workload's end state and what its checkers counted."""
    stats = result.stats
    return {"drained": txn.get("drained"), "commits": txn.get("commits"), "zombies": txn.get("zombies"),
            "stuck": txn.get("stuck", []), "hung": txn.get("hung", []),
            "instances": txn.get("instances"), "final_committed": txn.get("final_committed"),
            "exactly_once": stats.get("exactly-once", {}), "read_committed": stats.get("read-committed", {}),
            "txn_offsets": stats.get("txn-offsets", {}), "zombie": stats.get("zombie", {})}
