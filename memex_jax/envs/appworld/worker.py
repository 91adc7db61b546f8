"""One AppWorld task world behind a loopback HTTP server; runs in the AppWorld venv, never in the
trainer (it imports appworld, which freezes the process clock while a world is open).

  <appworld venv>/bin/python worker.py --port-file PATH --outputs DIR   (APPWORLD_ROOT: data root)

Protocol: POST a JSON object, get a JSON object back.
  /open      {task_id, timeout_seconds, official} -> {instruction, supervisor, apps}
  /execute   {code, max_chars} -> {output (its first max_chars), output_chars, completed,
             writes, changed_state}
  /evaluate  {} -> {checks: [{name, passed, detail}]}, the task's own checks on the live world
             (`ground_truth/checks.json`), or AppWorld's official evaluation for official tasks
  /ping      {} -> {}
The model's code runs here; an audit hook refuses any socket traffic off loopback, so the code
can reach nothing but this machine's loopback. The bound port is written to --port-file once the
server listens; stdout and stderr go wherever the parent sent them. AppWorld's per-world outputs
(saved states, logs) go to --outputs, this worker's own folder, so workers playing the same task
at once never share files.
"""

import argparse
import hashlib
import http.server
import ipaddress
import json
import os
import sqlite3
import sys
import traceback

_READ_ONLY = "get"
_SKIPPED_APPS = ("admin", "api_docs")  # engine bookkeeping and static docs, not the user's world


def _loopback_only(event, args):
  """Audit hook: socket traffic may only go to loopback (or a Unix socket)."""
  if event not in ("socket.connect", "socket.sendto", "socket.bind"):
    return
  address = args[1]
  if isinstance(address, tuple) and address:
    host = str(address[0])
    try:
      if ipaddress.ip_address(host).is_loopback:
        return
    except ValueError:
      if host == "localhost":
        return
    raise PermissionError(f"network access outside loopback is blocked ({host})")


class World:
  """The open AppWorld task and what the protocol needs around it."""

  def __init__(self, outputs):
    self.outputs = outputs
    self.world = None
    self.task_dir = ""
    self.official = False
    self._fingerprint_now = ""

  def open(self, task_id, timeout_seconds, official):
    # Imported at the first open, not at start-up, so that the server listens at once.
    from appworld import AppWorld  # pylint: disable=import-outside-toplevel
    self.close()
    root = os.environ["APPWORLD_ROOT"]
    self.task_dir = os.path.join(root, "data", "tasks", task_id)
    self.official = bool(official)
    # An absolute experiment name puts AppWorld's outputs there instead of under the root.
    self.world = AppWorld(task_id=task_id, experiment_name=self.outputs,
                          load_ground_truth=self.official, timeout_seconds=timeout_seconds)
    self._fingerprint_now = self._fingerprint()
    task = self.world.task
    return {"instruction": task.instruction, "supervisor": dict(task.supervisor),
            "apps": dict(task.app_descriptions)}

  def close(self):
    if self.world is not None:
      self.world.close()
      self.world = None

  def execute(self, code, max_chars):
    world = self._open_world()
    tracker = world.requester.request_tracker
    before = len(tracker.requests)
    output = world.execute(code)
    calls = tracker.requests[before:]
    writes = [f"{c['method'].upper()} {c['url']}" for c in calls if c["method"] != _READ_ONLY]
    changed = False
    if writes:  # only a write can change the world; hashing it costs more than tracking calls
      fingerprint = self._fingerprint()
      changed = fingerprint != self._fingerprint_now
      self._fingerprint_now = fingerprint
    return {"output": output[:max_chars], "output_chars": len(output),
            "completed": bool(world.task_completed()), "writes": writes, "changed_state": changed}

  def evaluate(self):
    world = self._open_world()
    if self.official:
      outcome = world.evaluate().to_dict()
      return {"checks": [{"name": str(p.get("requirement", "")), "passed": True, "detail": ""}
                         for p in outcome.get("passes", [])] +
                        [{"name": str(f.get("requirement", "")), "passed": False,
                          "detail": str(f.get("trace", ""))[:500]}
                         for f in outcome.get("failures", [])]}
    with open(os.path.join(self.task_dir, "ground_truth", "checks.json")) as f:
      checks = json.load(f)
    return {"checks": [self._check(c) for c in checks]}

  def _open_world(self):
    if self.world is None:
      raise RuntimeError("no task world is open; POST /open first")
    return self.world

  def _connect(self, app):
    home = self.world.models_to_db_home_path.removeprefix(":memory:")
    return sqlite3.connect(f"file:{home}/{app}.db?mode=memory&cache=shared", uri=True)

  def _query(self, app, sql):
    connection = self._connect(app)
    try:
      return [list(row) for row in connection.execute(sql).fetchall()]
    finally:
      connection.close()

  def _fingerprint(self):
    digest = hashlib.sha256()
    for app in self.world.task.allowed_apps:
      if app in _SKIPPED_APPS:
        continue
      connection = self._connect(app)
      try:
        tables = [r[0] for r in connection.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        for table in tables:
          rows = sorted(repr(row) for row in connection.execute(f'SELECT * FROM "{table}"'))
          digest.update(repr((app, table, rows)).encode())
      finally:
        connection.close()
    return digest.hexdigest()

  def _check(self, check):
    """One check: an SQL query's rows on the final world must equal `expected`."""
    try:
      rows = self._query(check["app"], check["sql"])
      if check.get("json_column"):  # answers are stored JSON-encoded
        rows = [[_normalized_answer(json.loads(v)) if v is not None else None for v in r]
                for r in rows]
      passed = rows == check["expected"]
      detail = "" if passed else f"got {rows!r}"[:500]
    except Exception as e:  # pylint: disable=broad-except
      passed, detail = False, f"{type(e).__name__}: {e}"
    return {"name": check["name"], "passed": passed, "detail": detail}


def _normalized_answer(value):
  """Answers compare as lower-cased strings; numbers by value (2 decimals)."""
  if isinstance(value, bool) or value is None:
    return str(value).lower()
  if isinstance(value, (int, float)):
    return f"{float(value):.2f}"
  text = str(value).strip().lower()
  try:
    return f"{float(text):.2f}"
  except ValueError:
    return text


def _handler(world):

  class Handler(http.server.BaseHTTPRequestHandler):

    def do_POST(self):  # pylint: disable=invalid-name
      length = int(self.headers.get("Content-Length", 0))
      try:
        request = json.loads(self.rfile.read(length) or b"{}")
        route = self.path.strip("/")
        if route == "open":
          reply = world.open(request["task_id"], request.get("timeout_seconds", 30),
                             request.get("official", False))
        elif route == "execute":
          reply = world.execute(request["code"], request.get("max_chars", 1 << 20))
        elif route == "evaluate":
          reply = world.evaluate()
        elif route == "ping":
          reply = {}
        else:
          raise KeyError(f"unknown route /{route}")
        status, body = 200, {"ok": True, **reply}
      except Exception as e:  # pylint: disable=broad-except
        status = 500
        body = {"ok": False, "error": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc(limit=4)}
      data = json.dumps(body, default=str).encode()
      self.send_response(status)
      self.send_header("Content-Type", "application/json")
      self.send_header("Content-Length", str(len(data)))
      self.end_headers()
      self.wfile.write(data)

    def log_message(self, *args):  # quiet: one line per call would flood the log
      del args

  return Handler


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--port-file", required=True)
  parser.add_argument("--outputs", required=True)
  args = parser.parse_args()
  world = World(os.path.abspath(args.outputs))
  server = http.server.HTTPServer(("127.0.0.1", 0), _handler(world))
  sys.addaudithook(_loopback_only)  # after binding; it cannot be removed from Python code
  with open(args.port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
  os.replace(args.port_file + ".tmp", args.port_file)
  try:
    server.serve_forever()
  finally:
    world.close()


if __name__ == "__main__":
  main()
