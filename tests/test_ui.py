"""The web view (issue 34) in a real browser: Debian's headless Chromium driven by Playwright.

One 3-broker cluster is shared by the module, and the tests run in order on it: the page on a fresh
cluster, a controller kill from the page, a coordinator kill from the page, then a replay of the run the
first tests recorded, and the token a server bound elsewhere than 127.0.0.1 asks for.  Each test saves a
screenshot in the module's artefact directory (printed; KAFKASIM_UI_SCREENSHOTS overrides it).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from conftest import write_cluster_yaml
from playwright.sync_api import sync_playwright

from client.group import GroupMember
from client.metadata import ClientError, ClusterClient
from client.producer import Producer
from zk.admin import create_topic
from launcher.cluster import Cluster
from node.config import load_config
from node.events import read_json_lines, read_run_events
from util.waiting import wait_for
from zk.server import free_port

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
SESSION_MS = 3000


class UiServer:
    """``kafkasim ui`` as a user starts it, in its own process."""

    def __init__(self, *args: str, host: str = "127.0.0.1"):
        self.host, self.port = host, free_port()
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen([sys.executable, "-m", "cli.main", "ui", "--host", host, "--port",
                                      str(self.port), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=str(REPO), env=env)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.url = f"http://{host}:{self.port}/"
        wait_for(self._up, 30, f"the ui server at {self.url}")
        if self.proc.poll() is not None:
            raise AssertionError("ui server exited:\n" + "".join(self.lines))

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            return True
        with urllib.request.urlopen(self.url + "api/config", timeout=2) as r:
            return r.status == 200

    def token(self) -> str | None:
        for line in self.lines:
            if "token:" in line:
                return line.rsplit("token:", 1)[1].strip()
        return None

    def page_token(self) -> str | None:
        """The token the served page carries (on loopback), read as the page's own origin reads it."""
        with urllib.request.urlopen(self.url, timeout=10) as r:
            m = re.search(r'<meta name="kafkasim-token" content="([^"]+)">', r.read().decode())
        return m.group(1) if m else None

    def post(self, body: dict, token: str | None = None, headers: dict | None = None,
             data: bytes | None = None) -> tuple[int, dict]:
        req = urllib.request.Request(self.url + "api/control", data=json.dumps(body).encode() if data is None else data,
                                     method="POST", headers={"Content-Type": "application/json",
                                                             **({"X-Kafkasim-Token": token} if token else {}),
                                                             **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    d = tmp_path_factory.mktemp("ui-cluster")
    path = write_cluster_yaml(d / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 3,
                              **{"zookeeper.session.timeout.ms": SESSION_MS, "group.min.session.timeout.ms": 500,
                                 "auto.leader.rebalance.enable": False,   # leaders stay where failovers put them
                                 "group.initial.rebalance.delay.ms": 200})
    c = Cluster(load_config(path), path)
    c.up(timeout=60)
    yield c
    c.close()
    Cluster(load_config(path), path).down()   # the state file also names brokers the page started


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    d = Path(os.environ.get("KAFKASIM_UI_SCREENSHOTS") or tmp_path_factory.mktemp("ui-screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    print(f"\nui screenshots: {d}")
    return d


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def live(cluster):
    ui = UiServer("--config", str(cluster.config_path))
    yield ui
    ui.close()


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(url)
    return page


def wait_page(page, js: str, arg=None, timeout_s: float = 30):
    page.wait_for_function(js, arg=arg, timeout=timeout_s * 1000, polling=100)


OFFSETS_ROWS = '[data-topic="__consumer_offsets"] [data-tp]'


def test_page_shows_three_brokers_the_controller_and_full_offsets_isrs(live, browser, cluster, shots):
    page = open_page(browser, live.url)
    wait_page(page, """() => document.querySelectorAll('#brokers tr[data-status="up"]').length === 3
        && document.querySelector('#controller-epoch').textContent === '1'
        && [...document.querySelectorAll('%s')].filter(r => r.dataset.isr.split(',').length === 3).length === 50
    """ % OFFSETS_ROWS)
    controller = cluster.view().controller_id
    assert page.inner_text("#controller-id") == str(controller)
    assert page.locator(f'#brokers tr[data-broker="{controller}"] .ctrl-badge').count() == 1
    assert page.locator(OFFSETS_ROWS).count() == 50
    # the rows on screen have their cells drawn (rows off screen get them when their block comes near)
    wait_page(page, """() => { const r = document.querySelector('%s');
        return r.querySelector('.ldr') !== null && r.querySelector('.ldr').textContent === r.dataset.leader; }"""
              % OFFSETS_ROWS)
    page.screenshot(path=str(shots / "ui-live.png"), full_page=False)
    # the topic filter hides rows that do not match, and shows them again
    page.fill("#topic-filter", "no-such-topic")
    assert page.locator(OFFSETS_ROWS).first.is_hidden()
    page.fill("#topic-filter", "consumer")
    assert page.locator(OFFSETS_ROWS).first.is_visible()
    # narrower windows keep every broker's controls in view: the brokers' box never scrolls sideways
    for width in (1400, 1280, 1100):
        page.set_viewport_size({"width": width, "height": 1000})
        wait_page(page, """() => { const s = document.querySelector('#brokers').closest('section');
            return s.scrollWidth <= s.clientWidth; }""", timeout_s=5)
    # one 24-hour clock everywhere: the controllers' list as the event stream
    assert all(re.search(r" at \d\d:\d\d:\d\d\.\d{3}$", li) for li in page.locator("#controllers li").all_inner_texts())
    page.close()


def test_killing_the_controller_from_the_page_shows_the_next_one(live, browser, cluster, shots):
    page = open_page(browser, live.url)
    wait_page(page, "() => document.querySelector('#controller-epoch').textContent === '1'")
    old = int(page.inner_text("#controller-id"))
    # the controls are the same elements whatever the rows show: a button an update replaced between a click's
    # mousedown and mouseup lost that click (a coordinator kill from the page once never reached the server)
    page.evaluate("() => document.querySelectorAll('#brokers button').forEach((b) => { b.__kept = true; })")
    page.click(f'button[data-action="kill"][data-broker="{old}"]')
    # a new controller once the dead one's session expires; it takes the dead broker out of every ISR
    wait_page(page, """(old) => document.querySelector('#controller-epoch').textContent === '2'
        && !['none', String(old)].includes(document.querySelector('#controller-id').textContent)
        && document.querySelector(`#brokers tr[data-broker="${old}"]`).dataset.status === 'dead'
        && [...document.querySelectorAll('[data-tp]')].every(r => !r.dataset.isr.split(',').includes(String(old)))
        && [...document.querySelectorAll('[data-tp]')].every(r => r.dataset.leader !== String(old))
    """, old, timeout_s=SESSION_MS / 1000 + 15)
    new = int(page.inner_text("#controller-id"))
    assert cluster.view().controller_id == new and cluster.controller_epoch() == 2
    assert page.evaluate("() => [...document.querySelectorAll('#brokers button')].every((b) => b.__kept)")
    assert page.locator('#brokers button').count() == 3 * 6
    assert page.locator("#controllers li").count() == 2
    page.screenshot(path=str(shots / "ui-controller-killed.png"))
    ui_log = read_json_lines(cluster.run_dir / "events" / "ui.jsonl")
    assert [(e["type"], e["action"], e["target"], e["ok"]) for e in ui_log] == [("ui_action", "kill", old, True)]
    # the page starts it again; it comes back into every offsets partition's ISR
    page.click(f'button[data-action="start"][data-broker="{old}"]')
    wait_page(page, """(old) => document.querySelector(`#brokers tr[data-broker="${old}"]`).dataset.status === 'up'
        && [...document.querySelectorAll('%s')].every(r => r.dataset.isr.split(',').includes(String(old)))
    """ % OFFSETS_ROWS, old, timeout_s=60)
    page.close()


class Workload:
    """A producer and two committing members of group ``g``, on threads, as client processes would be."""

    def __init__(self, cluster):
        self.stop = threading.Event()
        boot = [f"{b.host}:{b.port}" for b in cluster.cfg.brokers]
        self.cc = ClusterClient(boot)
        wait_for(lambda: self._refreshed(self.cc), 30, "metadata")
        self.threads = [threading.Thread(target=self._produce, daemon=True)]
        self.members = [GroupMember(ClusterClient(boot), "g", ["t"], client_id=f"c{i}", session_timeout_ms=3000,
                                    heartbeat_interval_ms=300) for i in range(2)]
        self.threads += [threading.Thread(target=self._consume, args=(m,), daemon=True) for m in self.members]
        for t in self.threads:
            t.start()

    @staticmethod
    def _refreshed(cc) -> bool:
        try:
            return bool(cc.refresh())
        except ClientError:
            return False

    def _produce(self) -> None:
        p = Producer(self.cc, acks=-1)
        i = 0
        while not self.stop.is_set():
            try:
                p.send("t", f"v{i}".encode())
                i += 1
            except Exception:
                pass
            self.stop.wait(0.05)

    def _consume(self, m: GroupMember) -> None:
        while not self.stop.is_set():
            try:
                m.poll(100)
                if offsets := m.positions():
                    m.commit(offsets)
            except Exception:
                self.stop.wait(0.05)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)
        for m in self.members:
            m.close(leave=True)
        self.cc.close()


def test_killing_a_groups_coordinator_from_the_page_shows_the_failover(live, browser, cluster, shots):
    create_topic(cluster.zk(), "t", 3, 3, {})
    work = Workload(cluster)
    try:
        page = open_page(browser, live.url)
        # the group is Stable with both members and committed offsets, as the page shows it
        wait_page(page, """() => { const r = document.querySelector('#groups [data-group="g"]');
            return r && r.dataset.state === 'Stable' && r.dataset.coordinator !== ''
                && r.querySelector('.members').children.length === 2 && r.querySelector('.offsets').children.length === 3; }
        """, timeout_s=60)
        old = int(page.get_attribute('#groups [data-group="g"]', "data-coordinator"))
        page.click(f'button[data-action="kill"][data-broker="{old}"]')
        wait_page(page, """(old) => { const r = document.querySelector('#groups [data-group="g"]');
            const f = document.querySelector('#failovers tr[data-group="g"]');
            return r.dataset.coordinator !== String(old) && r.dataset.coordinator !== ''
                && f && [...f.querySelectorAll('.stage.detect, .stage.elect, .stage.load, .stage.first_commit')]
                          .every(td => td.textContent.endsWith(' ms')); }
        """, old, timeout_s=SESSION_MS / 1000 + 30)
        new = int(page.get_attribute('#groups [data-group="g"]', "data-coordinator"))
        assert new != old
        stages = [float(page.inner_text(f'#failovers tr[data-group="g"] .stage.{s}').split()[0])
                  for s in ("detect", "elect", "load", "first_commit")]
        assert stages == sorted(stages), stages   # detect, then elect, then load, then the first commit
        page.screenshot(path=str(shots / "ui-coordinator-killed.png"))
        page.close()
    finally:
        work.close()


def test_replay_scrubbed_to_a_fault_shows_that_moments_leaders_and_isrs(cluster, browser, shots):
    run = cluster.run_dir
    faults = [e for e in read_json_lines(run / "events" / "ui.jsonl") if e["action"] == "kill"]
    assert len(faults) == 2
    ui = UiServer("--replay", str(run))
    try:
        page = open_page(browser, ui.url)
        wait_page(page, "() => document.body.dataset.t !== undefined && document.querySelectorAll('#markers .fault').length === 2")
        assert page.locator("#markers .elect").count() >= 1 and page.locator("#markers .load").count() >= 1
        # frames drawn late, as on a loaded machine: <body data-t> must still name the instant the rows show
        page.evaluate("() => { const raf = window.requestAnimationFrame.bind(window);"
                      " window.requestAnimationFrame = (cb) => setTimeout(() => raf(cb), 300); }")
        events = read_run_events(run)
        seen = []
        for fault in faults:
            t = fault["mono_ns"]
            page.evaluate("(t) => window.seekTo(t)", t)
            wait_page(page, "(t) => document.body.dataset.t === String(t)", t)
            # that moment's leaders and ISRs: the last state the controller wrote for each partition by then
            want: dict[str, tuple[str, str]] = {}
            for e in events:
                if e["mono_ns"] <= t and e["type"] == "partition_state_written":
                    want[f"{e['topic']}-{e['partition']}"] = (str(e["leader"]), ",".join(map(str, e["isr"])))
            got = page.eval_on_selector_all("[data-tp]", "rs => rs.map(r => [r.dataset.tp, r.dataset.leader, r.dataset.isr])")
            assert {tp: (leader, isr) for tp, leader, isr in got} == want
            seen.append(want)
        # two different moments: the first kill's failover moved leaders before the second kill
        moved = [tp for tp, (leader, _) in seen[0].items() if seen[1][tp][0] != leader]
        assert moved and all(seen[0][tp][0] == str(faults[0]["target"]) for tp in moved)
        page.evaluate("(t) => window.seekTo(t)", faults[1]["mono_ns"] + 4_000_000_000)
        wait_page(page, "() => document.querySelector('#failovers tr[data-group=\"g\"]') !== null")
        page.screenshot(path=str(shots / "ui-replay.png"))
        page.close()
    finally:
        ui.close()


def test_controls_need_the_token_when_bound_elsewhere_than_127_0_0_1(cluster, browser, shots):
    ui = UiServer("--config", str(cluster.config_path), host="127.0.0.2")
    try:
        token = ui.token()
        assert token
        status, body = ui.post({"action": "preferred-election"})
        assert status == 403 and "token" in body["error"]
        assert ui.post({"action": "preferred-election"}, token="wrong")[0] == 403
        page = open_page(browser, ui.url)
        wait_page(page, "() => document.querySelector('#notice').textContent.includes('token')")
        page.click("#btn-preferred")
        wait_page(page, "() => document.querySelector('#control-result').textContent.includes('failed')")
        page.fill("#token", token)
        page.click("#btn-preferred")
        wait_page(page, "() => document.querySelector('#control-result').textContent.includes('preferred leader election:')")
        # with the token, the other controls too: produce, and a group member started and stopped
        page.fill("#produce-topic", "t")
        page.fill("#produce-count", "5")
        page.click("#btn-produce")
        wait_page(page, "() => document.querySelector('#control-result').textContent.startsWith('produce: ')")
        assert page.inner_text("#control-result").count("t-") == 5   # the CLI's --verbose lines, one a record
        page.fill("#member-group", "ui-g")
        page.fill("#member-topic", "t")
        page.click("#btn-member-start")
        wait_page(page, """() => { const r = document.querySelector('#groups [data-group="ui-g"]');
            return r && r.dataset.state === 'Stable' && r.querySelector('.members').children.length === 1; }""")
        page.click("#btn-member-stop")
        wait_page(page, "() => document.querySelector('#control-result').textContent.includes('left')")
        page.screenshot(path=str(shots / "ui-token.png"))
        page.close()
        logged = [e for e in read_json_lines(cluster.run_dir / "events" / "ui.jsonl")
                  if e["action"] == "preferred-election"]
        # every request is logged, the refused ones too
        assert [e["ok"] for e in logged] == [False, False, False, True]
        assert all(e["remote"].startswith("127.") for e in logged)
        later = [(e["action"], e["ok"]) for e in read_json_lines(cluster.run_dir / "events" / "ui.jsonl")
                 if e["action"] in ("produce", "member-start", "member-stop")]
        assert later == [("produce", True), ("member-start", True), ("member-stop", True)]
    finally:
        ui.close()


def test_other_sites_and_rebound_names_are_refused_with_nothing_done(cluster):
    """The cross-origin hole: a page on another site can make the browser POST a "simple" request
    (text/plain, no preflight) to the web view, and DNS rebinding can make the web view that site's own
    origin.  Both are refused before anything is done: the broker keeps running, and the log has only
    refusals; the page's own origin, with its token, is obeyed."""
    ui = UiServer("--config", str(cluster.config_path))
    before = cluster.processes()
    victim = min(b for b, p in before.items() if p["state"] == "running")
    try:
        token = ui.page_token()
        assert token
        kill = json.dumps({"action": "kill", "broker": victim}).encode()
        host = f"127.0.0.1:{ui.port}"
        # the simple request another site's page makes: text/plain, its own Origin, no token
        status, body = ui.post({}, data=kill, headers={"Content-Type": "text/plain;charset=UTF-8",
                                                       "Origin": "http://evil.example"})
        assert status == 403 and "Origin" in body["error"], body
        # the same with the right Origin but text/plain (a form, a beacon): not JSON, refused
        status, body = ui.post({}, data=kill, headers={"Content-Type": "text/plain", "Origin": f"http://{host}"})
        assert status == 415 and "application/json" in body["error"], body
        # DNS rebinding: the browser sends the attacker's name as Host, and its page's origin matches it
        status, body = ui.post({}, data=kill, headers={"Host": f"evil.example:{ui.port}",
                                                       "Origin": f"http://evil.example:{ui.port}"})
        assert status == 403 and "rebound" in body["error"], body
        req = urllib.request.Request(ui.url, headers={"Host": f"evil.example:{ui.port}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)    # nor is the page (and its token) served to the rebound name
        assert refused.value.code == 403
        # a JSON request from the page's origin without the token
        status, body = ui.post({"action": "kill", "broker": victim}, headers={"Origin": f"http://{host}"})
        assert status == 403 and "token" in body["error"], body
        assert cluster.processes()[victim] == before[victim], (before, cluster.processes())
        logged = [e for e in read_json_lines(cluster.run_dir / "events" / "ui.jsonl") if e["remote"] is not None
                  and e["error"] is not None and e["error"].startswith("refused:")]
        assert len(logged) >= 4 and not any(e["ok"] for e in logged)
        # the page's own origin, with its token: obeyed (a harmless action)
        status, body = ui.post({"action": "preferred-election"}, token=token, headers={"Origin": f"http://{host}"})
        assert status == 200 and body["ok"], body
    finally:
        ui.close()


def test_read_only_hides_the_controls_and_refuses_them(cluster, browser):
    ui = UiServer("--config", str(cluster.config_path), "--read-only")
    try:
        page = open_page(browser, ui.url)
        wait_page(page, "() => document.body.classList.contains('readonly') && document.querySelectorAll('#brokers tbody tr').length === 3")
        assert not page.is_visible('button[data-action="kill"]') and not page.is_visible("#btn-produce")
        status, body = ui.post({"action": "kill", "broker": 1})
        assert status == 403 and "read-only" in body["error"]
        page.close()
    finally:
        ui.close()


def test_replay_of_a_chaos_run_marks_its_timeline_and_derives_the_same_stages(short_chaos_runs, browser):
    """A chaos run directory (cluster/events/, history.jsonl, results.json): the markers are the run's own
    timeline, and the reducer, fed the same lines, finds the same stages (elect is timed at the write's
    log line here, at the write's landing in judge/timeline.py: a few ms apart)."""
    from ui.server import Replayer

    run = Replayer(short_chaos_runs["clean"])
    rows = [r for r in json.loads((short_chaos_runs["clean"] / "results.json").read_text())["timeline"] if r["group"]]
    meta = run.meta()
    assert rows and [(s["group"], s["source"]) for s in meta["stages"] if s["group"]] == [
        (r["group"], "results.json") for r in rows]
    mine = {(r["fault"], r["group"]): r for r in run.final.failovers if r["group"]}
    # the reducer derives a fault's rows; a move no fault explains (the end phase's) is a marker only
    fault_rows = [r for r in rows if r["fault"] is not None]
    assert fault_rows
    for r in fault_rows:
        m = mine[(r["fault"], r["group"])]
        assert (m["old_leader"], m["new_leader"]) == (r["old_leader"], r["new_leader"])
        for stage, slack in (("detect_ms", 0.1), ("elect_ms", 50), ("load_ms", 0.1), ("first_commit_ms", 0.1)):
            assert (m[stage] is None) == (r[stage] is None), (stage, m, r)
            if r[stage] is not None:
                assert abs(m[stage] - r[stage]) <= slack, (stage, m[stage], r[stage])
    mid = run.at(fault_rows[0]["time_ns"] + 1)   # just after the fault: the killed broker is shown dead or paused
    assert {b["id"]: b["status"] for b in mid["brokers"]}[fault_rows[0]["old_leader"]] in ("dead", "paused")
    # the page: the run's faults and stages on the timeline, and the killed broker at the fault's time
    ui = UiServer("--replay", str(short_chaos_runs["clean"]))
    try:
        page = open_page(browser, ui.url)
        faults = [f for f in meta["faults"]]
        wait_page(page, "(n) => document.body.dataset.t !== undefined && document.querySelectorAll('#markers .fault').length === n",
                  len(faults))
        assert page.locator("#markers .load").count() == len([r for r in rows if r["load_ms"] is not None])
        t = fault_rows[0]["time_ns"] + 1
        page.evaluate("(t) => window.seekTo(t)", t)
        wait_page(page, "(t) => document.body.dataset.t === String(t)", t)
        assert page.get_attribute(f'#brokers tr[data-broker="{fault_rows[0]["old_leader"]}"]', "data-status") in ("dead", "paused")
        page.close()
    finally:
        ui.close()


@pytest.mark.cluster
def test_replay_of_a_simulated_transactional_run_shows_each_transactional_ids_state_and_coordinator(browser, tmp_path):
    """A simulated run with two exactly-once pipelines: the page's Transactions table shows, at the run's end,
    each transactional id in the state its coordinator last logged, and that coordinator."""
    from sim.run import SimOptions, SimRun

    run = tmp_path / "run"
    assert SimRun(SimOptions(seed=3, duration_s=8.0, groups=0, transactions=2, faults=()), run).run().verdict == "valid"
    events = sorted(read_run_events(run / "cluster"), key=lambda e: e["mono_ns"])
    last = {e["transactional_id"]: (e["broker"], e["to"]) for e in events if e["type"] == "txn_state_changed"}
    assert set(last) == {"eos-0", "eos-1"}
    ui = UiServer("--replay", str(run))
    try:
        page = open_page(browser, ui.url)
        wait_page(page, "() => document.body.dataset.t !== undefined")
        t = events[-1]["mono_ns"]
        page.evaluate("(t) => window.seekTo(t)", t)
        wait_page(page, "(t) => document.body.dataset.t === String(t)", t)
        for tid, (broker, state) in last.items():
            row = f'#transactions tr[data-txn="{tid}"]'
            assert page.get_attribute(row, "data-state") == state
            assert page.get_attribute(row, "data-coordinator") == str(broker)
            assert page.locator(row + " .tc").inner_text().startswith(str(broker))
        page.close()
    finally:
        ui.close()


@pytest.mark.cluster   # the ui server's process (no broker)
def test_replay_shows_an_offline_log_directory_on_its_broker_until_it_restarts(tmp_path, browser, shots):
    """A run's event logs with a log directory failing on broker 2, then broker 2 restarting: the page shows the
    directory offline on broker 2's row from the failure to the restart, and not before or after."""
    ev_dir = tmp_path / "events"
    ev_dir.mkdir()
    t0 = 5_000_000_000_000

    def line(ms: float, broker: int, type_: str, **fields) -> str:
        return json.dumps({"ts_ms": 1.7e12 + ms, "mono_ns": t0 + int(ms * 1e6), "broker": broker, "type": type_,
                           **fields}) + "\n"
    logs: dict[int, list[str]] = {b: [line(10 * b, b, "broker_starting", host="127.0.0.1", port=1, pid=100 + b)]
                                  for b in (1, 2, 3)}
    logs[1].append(line(100, 1, "controller_elected", epoch=1, epoch_zk_version=1, elect_ms=1.0))
    logs[2].append(line(2000, 2, "log_dir_failed", dir="/data/b2/d0", during="append",
                        error="OSError: [Errno 28] No space left on device", replicas=["__consumer_offsets-2"],
                        online_dirs=["/data/b2/d1"], offline_dirs=["/data/b2/d0"], halting=False))
    logs[2].append(line(6000, 2, "broker_starting", host="127.0.0.1", port=1, pid=202))
    logs[2].append(line(8000, 2, "broker_registered", broker_epoch=50, session_id="0x2", replaced_predecessor=None))
    for b, lines in logs.items():
        (ev_dir / f"broker-{b}.jsonl").write_text("".join(lines))
    ui = UiServer("--replay", str(tmp_path))
    try:
        page = open_page(browser, ui.url)
        wait_page(page, "() => document.body.dataset.t !== undefined")

        def offline_at(ms: float) -> list[str]:
            t = t0 + int(ms * 1e6)
            page.evaluate("(t) => window.seekTo(t)", t)
            wait_page(page, "(t) => document.body.dataset.t === String(t)", t)
            return page.eval_on_selector_all(
                ".offline-dirs", "els => els.map(e => e.closest('tr').dataset.broker + ' ' + e.textContent)")
        assert offline_at(1000) == []
        assert offline_at(3000) == ["2 offline: /data/b2/d0"]
        page.screenshot(path=str(shots / "ui-offline-log-dir.png"))
        assert offline_at(7000) == []
        page.close()
    finally:
        ui.close()
