"""Seeds that sweeps found failing, kept as tests once explained and fixed, and a sweep that reports a
seed whose run raises as a crashed seed and goes on (docs/simulation.md, "Seeds found by sweeps")."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from chaos.schedule import Fault
from sim import rpc
from sim.run import SimOptions, SimRun
from sim.world import World


def test_an_answer_to_a_request_made_before_the_caller_crashed_never_reaches_its_next_incarnation() -> None:
    """A paused peer that resumes answers what it had received; the caller's connection died with it."""
    w = World(seed=1)
    got: list = []
    handled: list = []

    def handler(payload, reply) -> None:
        handled.append(payload)
        reply(payload + 1)

    w.pause("b2")
    rpc.call(w, "b1", "b2", handler, 1, got.append, timeout_ms=10_000.0)    # waits at the paused b2
    w.run_until(10.0)
    w.crash("b1")
    w.restart("b1")
    w.run_until(20.0)
    w.resume("b2")
    w.run_until(20_000.0)
    assert handled == [1] and got == []       # b2 handled it; the restarted b1 gets neither answer nor timeout
    rpc.call(w, "b1", "b2", handler, 5, got.append, timeout_ms=10_000.0)    # the new incarnation's own call
    w.run_until(21_000.0)
    assert got == [6]


def _events(r, broker: int) -> list[dict]:
    return [e for e in r.events if e.get("broker") == broker]


def _second_process(events: list[dict]) -> list[dict]:
    starts = [i for i, e in enumerate(events) if e["type"] == "broker_starting"]
    assert len(starts) == 2
    return events[starts[1]:]


def test_seed_110_shrunk_a_restarted_follower_ignores_its_dead_predecessors_fetch() -> None:
    """`sim shrink 110`: broker 2 (leader of events/1, and controller) paused at 3.0 s until 7.255 s; broker 1
    killed at 3.227 s, back at 3.359 s.  When broker 2 resumed it answered the fetch broker 1's first process
    had sent it.  The simulated network used to deliver that answer to the restarted broker 1, whose dead
    replica manager then cut the shared log from 28 to 20 (``log_truncated``, reason above_leader_log_end,
    leader 2 epoch 0) and logged its HW 19 -> 20 after 27: ``hw-regression``.  A real process's answer goes to
    a closed connection.  (The old ZooKeeper session's expiry reached the new process the same way.)

    The runs' timing has moved since (the same interleaving came with the pause at 2.95 s and the kill at
    3.01 s once followers fetched in one session); since LeaderAndIsr takes up hosted followers first and a
    fetcher backs off only its partitions with errors, the topic's replicas are placed otherwise and broker 2
    leads events/2: the pause at 3.05 s and the same kill make the interleaving on events/2, and with the old
    delivery (an answer to whichever incarnation is up) the restarted broker 1's log of events/2 is cut to 20
    by leader 2 at 7.358 s (``hw-above-isr-leo``)."""
    tp = ("events", 2)
    faults = [Fault(0, 3050, 7255, "pause", "broker:2", 2419671056), Fault(1, 3227, 3359, "kill", "broker:1", 1316516484)]
    r = SimRun(SimOptions(seed=110, duration_s=10.3, schedule=faults)).run()
    assert r.verdict == "valid", r.results["checks"]["anomalies"]
    assert [e["broker"] for e in r.events if e["type"] == "became_leader" and (e["topic"], e["partition"]) == tp
            and e["mono_ns"] < 3_150 * 10**6] == [2]    # broker 2 led it when it was paused
    mine = _second_process(_events(r, 1))
    # the schedule still makes the interleaving: broker 1 came back and followed events/2 past offset 20
    # before broker 2 resumed
    resumed_ns = 7_355 * 10**6   # the pause's heal: 100 ms of setup before the workload's time 0
    assert any(e["type"] == "hw_changed" and (e["topic"], e["partition"]) == tp and e["new"] > 20
               and e["mono_ns"] < resumed_ns for e in mine)
    assert not [e for e in mine if e["type"] == "log_truncated" and e.get("leader") == 2]
    hws = [e["new"] for e in mine if e["type"] == "hw_changed" and (e["topic"], e["partition"]) == tp]
    assert hws == sorted(hws)
    # one registration, no expiry of a session this process never had
    assert [e["type"] for e in mine if e["type"] in ("broker_registered", "zk_session_expired")] == ["broker_registered"]


def test_seed_1241_runs_to_its_verdict() -> None:
    """`sim run --seed 1241 --brokers 3 --groups 1 --duration 30` raised ``leader epoch 3 is older than the
    latest 4``: broker 1, paused, answered at the end a fetch from broker 2's first process, and the restarted
    broker 2's log, whose epoch cache had reached epoch 4, appended the epoch-3 batch."""
    r = SimRun(SimOptions(seed=1241, brokers=3, groups=1, duration_s=30.0)).run()
    assert r.verdict == "valid", r.results["checks"]["anomalies"]


def test_seed_2268_a_zombie_leader_at_a_superseded_epoch_is_not_a_lost_write() -> None:
    """One of the 100,000-seed run's 29 `lost-write` seeds: broker 1, paused across its session's expiry, took
    up on resuming the LeaderAndIsr that made it leader of events/0 at epoch 2, after the controller had
    moved the partition to broker 2 at epoch 3 (docs/simulation.md, "Seeds found by sweeps")."""
    r = SimRun(SimOptions(seed=2268, brokers=3, groups=1, duration_s=30.0)).run()
    assert r.verdict == "valid", r.results["checks"]["anomalies"]
    written = [e for e in r.events if e["type"] == "partition_state_written" and e["topic"] == "events"
               and e["partition"] == 0]
    zombie = [e for e in r.events if e["type"] == "became_leader" and e["topic"] == "events" and e["partition"] == 0
              and e["broker"] == 1 and e["leader_epoch"] == 2]
    assert zombie, "broker 1 no longer becomes a zombie leader: the seed does not test the rule any more"
    at = r.events.index(zombie[-1])
    assert max(e["leader_epoch"] for e in written if r.events.index(e) < at) == 3
    assert r.results["invariants"]["fenced_leaders"] >= 1


def test_seed_2665_a_member_whose_offset_fetch_timed_out_fetches_again_and_the_group_drains() -> None:
    """Seed 2665 (`unseen-message`, not-drained): both members synced generation 2 at broker 1 and asked it
    for their partitions' committed offsets; the controller-kill fault took broker 1 down 0.3 ms later.  The
    fetches timed out (coordinator lost) and the simulated members, assigned partitions with no position,
    polled nothing until the run ended.  Kafka's consumer fetches the committed offsets of partitions without
    a position again on every poll (refreshCommittedOffsetsIfNeeded), and so does the simulated member now.

    The seed's own faults no longer meet the members' fetches since the controller's failover follows Kafka's
    order (the whole state first, then each dead broker's replicas offline, then the elections: the run's
    timing moved), so the interleaving is rebuilt with an explicit fault: the coordinator, broker 3, killed
    while both members, just synced, wait for their committed offsets (the fetches leave at 1,007.8 and
    1,007.9 ms; the kill was at 1,005 ms before the brokers' start-up UpdateMetadata came first, as Kafka's
    onBrokerStartup sends it, and at 1,004 ms on the branch where followers first fetched in one session;
    with both, and a fetcher backing off only its partitions with errors, the fetches leave about when they
    did after the first change: of the kills tried (1,000, 1,002, 1,004-1,008, 1,010 ms) those at 1,007 and
    1,008 ms catch both, and 1,008 falls between their leaving and their answers)."""
    r = SimRun(SimOptions(seed=2665, brokers=3, groups=1, duration_s=30.0)).run()
    assert r.verdict == "valid", r.results["checks"]["anomalies"]
    r = SimRun(SimOptions(seed=2665, brokers=3, groups=1, duration_s=30.0,
                          schedule=[Fault(0, 1008, 4000, "kill", "broker:3", 1)])).run()
    assert r.verdict == "valid", r.results["checks"]["anomalies"]
    fetches = [h for h in r.history if h["f"] == "fetch-committed" and h["type"] != "invoke" and not h.get("final")]
    timed_out = {h["process"] for h in fetches if h.get("error") == "DEADLINE_EXCEEDED"}
    assert timed_out == {1, 3}   # the interleaving is there: both members' fetches timed out
    for proc in timed_out:
        mine = [h for h in fetches if h["process"] == proc]
        last_fail = max(i for i, h in enumerate(mine) if h["type"] == "fail")
        again = mine[last_fail + 1]   # the next fetch: at the next poll, not at the next rebalance seconds later
        assert again["type"] == "ok" and again["time"] - mine[last_fail]["time"] < 1e9, (mine[last_fail], again)


def test_seed_1134_a_follower_truncates_at_the_leaders_batch_boundary_not_below_the_hw() -> None:
    """Seed 1134, found by the invariants checked at every step (``hw-above-isr-leo``, healed before the end):
    broker 3, an ISR member of events/2, truncated to the new leader's epoch-2 end (offset 70) and its log
    ended at 51, under the leader's HW of 70.  The simulated leader sent records regrouped by epoch, so the
    follower held offsets 51..89 as one batch and a truncation cuts a batch whole.  Kafka's follower copies
    the leader's batches as they are, so a leader's epoch boundary is one of the follower's batch boundaries;
    the simulated leader now sends its batches as appended."""
    r = SimRun(SimOptions(seed=1134)).run()
    assert r.verdict == "valid", r.results["checks"]["anomalies"]
    assert r.results["invariants"]["stopped_at"] is None
    cut = [e for e in r.events if e["type"] == "log_truncated" and e["topic"] == "events"]
    assert cut, "the interleaving: a follower of events truncated"
    for e in cut:   # the HW it then had is never cut below the offset it truncated to
        after = [x for x in r.events if x["type"] == "hw_changed" and x.get("reason") == "truncated"
                 and (x["broker"], x["topic"], x["partition"]) == (e["broker"], e["topic"], e["partition"])
                 and e["mono_ns"] < x["mono_ns"] <= e["mono_ns"] + 1000]
        assert all(x["new"] >= e["to_offset"] for x in after), (e, after)


# the shrunk schedules: (seed, duration s, faults, the broker, the heal after which it must register again, ms)
_UNREGISTERED = {
    28045: (24.7, [Fault(0, 16650, 21386, "pause", "broker:3", 1840283653),
                   Fault(1, 19949, 21747, "partition", "broker:3", 668171435, peer="zookeeper", direction="from")],
            3, 21747),
    72479: (11.3, [Fault(0, 2120, 7935, "pause", "broker:2", 1704875991),
                   Fault(1, 7189, 8253, "partition", "broker:2", 1624964694, peer="zookeeper", direction="to")],
            2, 8253),
}


@pytest.mark.parametrize("seed", sorted(_UNREGISTERED))
def test_seeds_shrunk_a_broker_whose_session_expired_while_zookeeper_was_unreachable_registers_again(seed) -> None:
    """Seeds 4776, 28045, 40641, 42401, 74466 (``unseen-message``, not-drained) and 17922, 72479 (``lost-commit``)
    of the 100,000-seed sweep: a broker learnt its session had expired (resuming from a pause) while it could
    not reach ZooKeeper; the register-and-re-elect event that follows an expiry (controller/redo.py) was cut
    short and waited to be redone on a tick "once the connection is back", but the simulated controller
    counted an expired session as no connection, and only that event opens the new session: the broker never
    registered again.  Unregistered, it got no LeaderAndIsr: its partitions stayed offline or led at stale
    epochs (40641's ``__consumer_offsets`` leaders), the group never drained, and the final committed-offset
    fetch could reach it, still the group's coordinator at a stale epoch, and read offsets older than completed
    commits (72479's and 17922's ``lost-commit``).  Kafka's ZooKeeperClient opens a new session by itself
    (reinitialize, retried until it has one) and registerBroker waits for the connection.

    `sim shrink 28045`: broker 3 paused 16.65..21.386 s (its session expires meanwhile) and cut off from
    ZooKeeper's answers 19.949..21.747 s; `sim shrink 72479`: broker 2 paused 2.12..7.935 s and its requests
    to ZooKeeper cut 7.189..8.253 s.  Each finds the expiry on resuming and cannot register yet."""
    duration_s, faults, broker, heal_ms = _UNREGISTERED[seed]
    r = SimRun(SimOptions(seed=seed, duration_s=duration_s, schedule=faults)).run()
    assert r.verdict == "valid", r.results["checks"]["anomalies"]
    mine = [e for e in _events(r, broker)
            if e["type"] in ("zk_session_expired", "controller_error", "broker_registered")]
    expired = next(i for i, e in enumerate(mine) if e["type"] == "zk_session_expired")
    # the interleaving: the re-registration was cut short, to be redone...
    cut = mine[expired + 1]
    assert (cut["type"], cut.get("event"), cut.get("redo")) == ("controller_error", "register_and_reelect", True)
    again = [e for e in mine[expired + 1:] if e["type"] == "broker_registered"]
    # ...and it was, soon after ZooKeeper was reachable again (the heal; 100 ms of setup before time 0)
    assert again and again[0]["mono_ns"] < (heal_ms + 100 + 1000) * 10**6, mine


def test_seed_17922_shrunk_a_broker_told_its_session_expired_while_cut_off_registers_once_zookeeper_answers() -> None:
    """`sim shrink 17922` (``lost-commit``, found by a 100,000-seed sweep; seed 72479 the same): broker 2, the
    coordinator of g1 (leader of __consumer_offsets/2 at leader epoch 3), paused at 16.2 s until 20.2 s, and
    cut off from everyone, ZooKeeper too, from 19.9 s until 20.3 s.  It resumed to learn that its session had
    expired; its register-and-re-elect could not reach ZooKeeper and waited to be redone "once the connection
    is back", but the simulated ZooKeeper client counted an expired session as no connection, and only that
    registration opens a new one: broker 2 never registered again.  Never a live broker, it got no
    LeaderAndIsr, kept leading __consumer_offsets/2 at epoch 3 and g1's offsets of before the pause (its
    appends all timed out: its ISR's other members followed the new leaders), and told clients, from its
    stale metadata, that it was g1's coordinator: the run's final fetch-committed read 58 there, after a
    commit of 60 acknowledged by broker 1 (leader at epoch 8).  kazoo (and Kafka's ZooKeeperClient) opens a
    new session by itself once ZooKeeper answers; the simulated client now counts as connected then."""
    faults = [Fault(0, 8958, 13016, "partition", "broker:1", 1458745199, peer="rest", direction="both"),
              Fault(1, 16136, 20133, "pause", "broker:2", 3608994892),
              Fault(2, 19754, 20155, "partition", "broker:2", 3495983906, peer="rest", direction="from")]
    r = SimRun(SimOptions(seed=17922, duration_s=23.2, schedule=faults)).run()
    assert r.verdict == "valid", r.results["checks"]["anomalies"]
    mine = _events(r, 2)
    expired = next(e for e in mine if e["type"] == "zk_session_expired")
    after = [e for e in mine if e["mono_ns"] >= expired["mono_ns"]]
    # the interleaving: broker 2 learned of the expiry while ZooKeeper could not be reached
    assert any(e["type"] == "controller_error" and e["event"] == "register_and_reelect" and e["redo"] for e in after)
    healed_ns = 20_255 * 10**6   # the partition's heal (100 ms of setup before the workload's time 0)
    registered = next(e for e in after if e["type"] == "broker_registered")
    assert healed_ns <= registered["mono_ns"] <= healed_ns + 500 * 10**6   # redone on a tick once ZooKeeper answers
    # then the controller's LeaderAndIsr takes its offsets partition away, and g1 with it
    assert any(e["type"] == "coordinator_unloaded" and e["partition"] == 2 and e["groups"] == 1
               and e["mono_ns"] > registered["mono_ns"] for e in mine)



class _Planted(SimRun):
    """A run that raises in seed 3 (the sweep's own SimRun, replaced by monkeypatch)."""

    def run(self):
        if self.opts.seed == 3:
            raise RuntimeError("planted crash in seed 3")
        return super().run()


def _sweep_with_a_crash(tmp_path: Path, monkeypatch, capsys, jobs: int) -> None:
    from cli.main import main
    import sim.sweep as sweep_mod

    monkeypatch.setattr(sweep_mod, "SimRun", _Planted)
    out = tmp_path / "sweep"
    code = main(["sim", "sweep", "--seeds", "2..4", "--jobs", str(jobs), "--duration", "4", "--no-progress",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 1
    assert "crashed seeds" in printed and "RuntimeError: planted crash in seed 3" in printed
    assert "seed 3 crashed:" in printed and "Traceback (most recent call last)" in printed
    assert ", in run\n" in printed    # the traceback names the frame that raised
    assert "replay one: kafkasim sim run --seed 3" in printed
    lines = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    assert [(x["seed"], x["verdict"] == "crashed") for x in lines] == [(2, False), (3, True), (4, False)]
    assert all(x["verdict"] in ("valid", "unknown", "invalid") and x["digest"] for x in lines if x["seed"] != 3)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["crashed"] == [{"seed": 3, "error": "RuntimeError: planted crash in seed 3"}]
    assert summary["run"] == 3 and summary["verdicts"]["crashed"] == 1
    assert "planted crash in seed 3" in (out / "crashed" / "seed-3.txt").read_text()


def test_a_sweep_reports_a_seed_that_raises_as_crashed_and_goes_on(tmp_path: Path, monkeypatch, capsys) -> None:
    _sweep_with_a_crash(tmp_path, monkeypatch, capsys, jobs=1)


@pytest.mark.cluster   # a process pool: its workers are forked with the patch in place
def test_a_sweep_in_worker_processes_reports_a_crashed_seed_too(tmp_path: Path, monkeypatch, capsys) -> None:
    _sweep_with_a_crash(tmp_path, monkeypatch, capsys, jobs=2)
