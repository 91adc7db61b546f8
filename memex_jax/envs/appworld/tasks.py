"""Task designs for generated AppWorld worlds: the people and their app data, the instruction,
the checks of the final state, and a reference solution; pure Python, no engine.

A world has a supervisor, people in the supervisor's phone contacts (each with a relationship),
SimpleNote notes, Venmo payments between the supervisor and those people, and files in the
supervisor's home folder. Task types, by difficulty (apps used):
  1 note_lookup (simple_note): answer a question about the notes.
  1 note_pin (simple_note): pin exactly the notes with a tag.
  2 file_sort (file_system): move the downloads of one type into a new folder.
  2 contact_payments (phone, venmo): cross-reference contacts with payments, answer a total.
  3 received_note (phone, venmo, simple_note): write a note of the money received from people
    of one relationship.
Each check is an SQL query on one app's final database and the rows it must return (what must
change and what must not); the task's score is the fraction of checks passed.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable

FIRST_NAMES = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "John", "Hedy",
               "Claude", "Radia", "Ken", "Margaret", "Dennis", "Shafi", "Tim", "Leslie", "Anita",
               "Niklaus", "Karen")
LAST_NAMES = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Backus",
              "Lamarr", "Shannon", "Perlman", "Thompson", "Hamilton", "Ritchie", "Goldwasser",
              "Lee", "Lamport", "Borg", "Wirth", "Jones")
RELATIONSHIPS = ("friend", "family", "coworker")
NOTE_TITLES = ("Groceries", "Project ideas", "Gift list", "Travel plan", "Book club", "Recipes",
               "Workout log", "Meeting notes", "Garden", "Budget", "Movies to watch", "Podcasts",
               "Car service", "Birthday plans", "Reading list", "Home repairs", "Packing list",
               "Language practice", "Conference talks", "Passwords hint", "Quotes", "Dentist",
               "Bike routes", "Photo ideas", "Wedding", "Volunteering", "Hiking gear", "Taxes",
               "Tea tasting", "Board games")
TAGS = ("home", "work", "personal", "urgent", "later")
PAYMENT_NOTES = ("dinner", "rent share", "concert tickets", "groceries", "taxi", "gift",
                 "coffee", "book", "lunch", "movie night")
FILE_STEMS = ("report", "invoice", "holiday", "scan", "notes", "budget", "ticket", "receipt",
              "draft", "summary", "letter", "contract", "menu", "slides", "plan", "photo")
FILE_TYPES = ("pdf", "jpg", "txt", "csv")
FILE_FOLDERS = ("downloads", "documents", "photos")
TASK_DATETIME = "2023-06-15T12:00:00"
# Where each app keeps the user's own account: the login name field.
LOGIN_FIELD = {"simple_note": "email", "venmo": "email", "phone": "phone_number",
               "file_system": "email"}


@dataclasses.dataclass(frozen=True)
class TaskDesign:
  """One task world and how it is judged.

  Attributes:
    task_id: AppWorld task id (`<generator>_<number>`: exactly one underscore).
    task_type: one of TASK_TYPES.
    difficulty: 1 (one app, few steps) to 3 (three apps, more steps).
    apps: the apps the task needs.
    specs: AppWorld's specs.json fields (instruction, supervisor, datetime).
    records: app -> [{"model", "fields"}], the world's rows in insertion order.
    checks: [{"name", "app", "sql", "expected", "json_column"?}] on the final databases.
    solution: the reference solution, one code cell per step.
  """

  task_id: str
  task_type: str
  difficulty: int
  apps: tuple[str, ...]
  specs: dict[str, Any]
  records: dict[str, list[dict[str, Any]]]
  checks: list[dict[str, Any]]
  solution: list[str]

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


@dataclasses.dataclass
class _World:
  """A sampled world: records plus the facts the task builders read."""

  supervisor: dict[str, str]
  passwords: dict[str, str]
  people: list[dict[str, Any]]  # first_name, last_name, email, phone_number, relationship
  notes: list[dict[str, Any]]  # id, title, content, tags, pinned, created_at
  payments: list[dict[str, Any]]  # id, person (index), sent (bool), amount, created_at
  home: str  # the supervisor's home folder in file_system, ending with /
  files: list[dict[str, str]]  # path, content
  records: dict[str, list[dict[str, Any]]]


def _row(model: str, **fields: Any) -> dict[str, Any]:
  return {"model": model, "fields": fields}


def _stamp(rng: random.Random, month_from: int = 1) -> str:
  return f"2023-{rng.randint(month_from, 5):02d}-{rng.randint(1, 28):02d}T" \
         f"{rng.randint(8, 20):02d}:{rng.randint(0, 59):02d}:00"


def sample_world(rng: random.Random, num_people: int, num_notes: int,
                 num_payments: int) -> _World:
  """A supervisor, `num_people` contacts, their notes and payments (all distinct dates)."""
  names = rng.sample([(f, l) for f in FIRST_NAMES for l in LAST_NAMES], num_people + 1)
  (first, last), others = names[0], names[1:]
  supervisor = {"first_name": first, "last_name": last,
                "email": f"{first}.{last}@example.com".lower(),
                "phone_number": f"555{rng.randint(1000000, 9999999)}"}
  passwords = {app: f"{app[:4]}-{rng.randint(10000, 99999)}" for app in LOGIN_FIELD}
  people = [{"first_name": f, "last_name": l, "email": f"{f}.{l}@example.org".lower(),
             "phone_number": f"555{rng.randint(1000000, 9999999)}",
             "relationship": RELATIONSHIPS[i % len(RELATIONSHIPS)]}
            for i, (f, l) in enumerate(others)]
  stamps = sorted({_stamp(rng) for _ in range(4 * (num_notes + num_payments))})
  rng.shuffle(stamps)
  notes = [{"id": i + 1, "title": title, "content": f"{title}: item {rng.randint(1, 99)}",
            "tags": rng.sample(TAGS, rng.randint(0, 2)), "pinned": rng.random() < 0.3,
            "created_at": stamps.pop()}
           for i, title in enumerate(rng.sample(NOTE_TITLES, num_notes))]
  payments = [{"id": i + 1, "person": rng.randrange(num_people), "sent": rng.random() < 0.5,
               "amount": round(rng.uniform(3, 120), 2), "created_at": stamps.pop(),
               "description": rng.choice(PAYMENT_NOTES)} for i in range(num_payments)]
  home = f"/home/{first.lower()}/"
  names = [f"{stem}_{n}.{ext}" for stem in FILE_STEMS for ext in FILE_TYPES for n in (1, 2)]
  files = [{"path": f"{home}{rng.choice(FILE_FOLDERS)}/{name}",
            "content": f"{name} of {first}, version {rng.randint(1, 9)}"}
           for name in rng.sample(names, num_notes + 4)]
  folders = ["/", "/home/", home] + [f"{home}{folder}/" for folder in FILE_FOLDERS]
  records: dict[str, list[dict[str, Any]]] = {
      "file_system": [_row("User", id=1, first_name=first, last_name=last,
                           email=supervisor["email"], password=passwords["file_system"],
                           verified=True)] +
                     [_row("Directory", user_id=1, path=p) for p in folders] +
                     [_row("File", user_id=1, **f) for f in files],
      "supervisor": [_row("Supervisor", **supervisor, birthday="1990-01-01", sex="female")] +
                    [_row("AccountPassword", supervisor_id=1, account_name=app, password=pw)
                     for app, pw in passwords.items()],
      "simple_note": [_row("User", id=1, first_name=first, last_name=last,
                           email=supervisor["email"], password=passwords["simple_note"],
                           verified=True)] +
                     [_row("Note", id=n["id"], user_id=1, title=n["title"], content=n["content"],
                           tags=n["tags"], pinned=n["pinned"], created_at=n["created_at"],
                           updated_at=n["created_at"]) for n in notes],
      "phone": [_row("User", id=1, first_name=first, last_name=last,
                     phone_number=supervisor["phone_number"], password=passwords["phone"])] +
               [_row("Contact", id=i + 1, user_id=1, first_name=p["first_name"],
                     last_name=p["last_name"], email=p["email"], phone_number=p["phone_number"],
                     relationships=[p["relationship"]]) for i, p in enumerate(people)],
      "venmo": [_row("User", id=1, first_name=first, last_name=last, email=supervisor["email"],
                     password=passwords["venmo"], verified=True, venmo_balance=500.0)] +
               [_row("User", id=i + 2, first_name=p["first_name"], last_name=p["last_name"],
                     email=p["email"], password=f"pw-{rng.randint(10000, 99999)}", verified=True)
                for i, p in enumerate(people)] +
               [_row("Transaction", id=t["id"],
                     sender_id=1 if t["sent"] else t["person"] + 2,
                     receiver_id=t["person"] + 2 if t["sent"] else 1, amount=t["amount"],
                     description=t["description"], created_at=t["created_at"],
                     updated_at=t["created_at"]) for t in payments],
  }
  return _World(supervisor, passwords, people, notes, payments, home, files, records)


# The reference solutions share this first cell: passwords, logins and a pager.
_PRELUDE = """\
passwords = {a['account_name']: a['password'] for a in apis.supervisor.show_account_passwords()}
profile = apis.supervisor.show_profile()
tokens = {app: getattr(apis, app).login(username=profile[field], password=passwords[app])
          ['access_token'] for app, field in LOGINS.items()}
def every_page(api, **kwargs):
    items, page = [], 0
    while True:
        batch = api(page_index=page, page_limit=20, **kwargs)
        items += batch
        if len(batch) < 20:
            return items
        page += 1
print(sorted(tokens))"""


def _prelude(apps: tuple[str, ...]) -> str:
  return _PRELUDE.replace("LOGINS", repr({app: LOGIN_FIELD[app] for app in apps}))


def _answer_check(expected: str | None) -> dict[str, Any]:
  """The answer given to complete_task (normalised like the worker: lower case, 2-decimal
  numbers, "none" for no answer)."""
  return {"name": "answer", "app": "supervisor", "sql": "SELECT answer FROM tasks",
          "json_column": True, "expected": [[expected]]}


def _notes_kept(world: _World) -> dict[str, Any]:
  return {"name": "existing notes keep their text", "app": "simple_note",
          "sql": f"SELECT id, title, content FROM notes WHERE id <= {len(world.notes)} "
                 "ORDER BY id",
          "expected": [[n["id"], n["title"], n["content"]] for n in world.notes]}


def _payments_kept(world: _World) -> dict[str, Any]:
  return {"name": "venmo payments unchanged", "app": "venmo",
          "sql": "SELECT id, amount FROM transactions ORDER BY id",
          "expected": [[t["id"], t["amount"]] for t in world.payments]}


def _contacts_kept(world: _World) -> dict[str, Any]:
  return {"name": "contacts unchanged", "app": "phone",
          "sql": "SELECT id, email FROM contacts ORDER BY id",
          "expected": [[i + 1, p["email"]] for i, p in enumerate(world.people)]}


def _note_lookup(world: _World, rng: random.Random) -> tuple[str, list, list[str]]:
  del rng
  latest = max(world.notes, key=lambda n: n["created_at"])
  instruction = "What is the title of the note I created most recently in SimpleNote?"
  checks = [_answer_check(latest["title"].lower()), _notes_kept(world),
            {"name": "pins unchanged", "app": "simple_note",
             "sql": "SELECT id FROM notes WHERE pinned = 1 ORDER BY id",
             "expected": [[n["id"]] for n in world.notes if n["pinned"]]}]
  solution = [
      _prelude(("simple_note",)),
      "notes = every_page(apis.simple_note.search_notes, access_token=tokens['simple_note'], "
      "sort_by='-created_at', dont_reorder_pinned=True)\nprint(notes[0]['title'])",
      "apis.supervisor.complete_task(answer=notes[0]['title'])"]
  return instruction, checks, solution


def _note_pin(world: _World, rng: random.Random) -> tuple[str, list, list[str]]:
  tags = sorted({t for n in world.notes for t in n["tags"]}) or [TAGS[0]]
  tag = rng.choice(tags)
  instruction = (f"In SimpleNote, pin every note of mine tagged '{tag}' and unpin all my other "
                 "notes.")
  checks = [{"name": f"exactly the '{tag}' notes are pinned", "app": "simple_note",
             "sql": "SELECT id FROM notes WHERE pinned = 1 ORDER BY id",
             "expected": [[n["id"]] for n in world.notes if tag in n["tags"]]},
            {"name": "no notes added or removed", "app": "simple_note",
             "sql": "SELECT count(*) FROM notes", "expected": [[len(world.notes)]]},
            _notes_kept(world), _answer_check("none")]
  solution = [
      _prelude(("simple_note",)),
      "notes = every_page(apis.simple_note.search_notes, access_token=tokens['simple_note'])\n"
      f"for note in notes:\n"
      f"    apis.simple_note.update_note(access_token=tokens['simple_note'], "
      f"note_id=note['note_id'], pinned={tag!r} in note['tags'])\nprint(len(notes))",
      "apis.supervisor.complete_task()"]
  return instruction, checks, solution


def _file_sort(world: _World, rng: random.Random) -> tuple[str, list, list[str]]:
  downloads = f"{world.home}downloads/"
  present = sorted({f["path"].rsplit(".", 1)[1] for f in world.files
                    if f["path"].startswith(downloads)})
  ext = rng.choice(present or list(FILE_TYPES))
  target = f"{world.home}documents/{ext}_files/"
  moved = {f["path"]: target + f["path"].rsplit("/", 1)[1] for f in world.files
           if f["path"].startswith(downloads) and f["path"].endswith("." + ext)}
  final = sorted([moved.get(f["path"], f["path"]), f["content"]] for f in world.files)
  instruction = (f"In my file system, move every '.{ext}' file that is directly in ~/downloads/ "
                 f"into a new folder ~/documents/{ext}_files/, keeping the file names; leave "
                 "every other file where it is.")
  checks = [{"name": f"the .{ext} downloads are in the new folder", "app": "file_system",
             "sql": f"SELECT path FROM files WHERE instr(path, '{target}') = 1 ORDER BY path",
             "expected": [[p] for p in sorted(moved.values())]},
            {"name": "the other downloads stay", "app": "file_system",
             "sql": f"SELECT path FROM files WHERE instr(path, '{downloads}') = 1 ORDER BY path",
             "expected": sorted([f["path"]] for f in world.files
                                if f["path"].startswith(downloads) and f["path"] not in moved)},
            {"name": "every file keeps its content", "app": "file_system",
             "sql": "SELECT path, content FROM files ORDER BY path", "expected": final},
            _answer_check("none")]
  solution = [
      _prelude(("file_system",)),
      "token = tokens['file_system']\n"
      "downloads = apis.file_system.show_directory(access_token=token, "
      "directory_path='~/downloads/', entry_type='files', recursive=False)\n"
      f"apis.file_system.create_directory(access_token=token, directory_path={target!r})\n"
      "for path in downloads:\n"
      f"    if path.endswith('.{ext}'):\n"
      "        apis.file_system.move_file(access_token=token, source_file_path=path, "
      f"destination_file_path={target!r} + path.rsplit('/', 1)[1])\nprint(len(downloads))",
      "apis.supervisor.complete_task()"]
  return instruction, checks, solution


def _relationship_with_payments(world: _World, rng: random.Random, sent: bool) -> str:
  used = sorted({world.people[t["person"]]["relationship"] for t in world.payments
                 if t["sent"] == sent})
  return rng.choice(used or list(RELATIONSHIPS))


def _total(world: _World, relationship: str, sent: bool) -> float:
  return round(sum(t["amount"] for t in world.payments if t["sent"] == sent and
                   world.people[t["person"]]["relationship"] == relationship), 2)


_CONTACT_EMAILS = ("contacts = every_page(apis.phone.search_contacts, "
                   "access_token=tokens['phone'])\n"
                   "emails = {{c['email'] for c in contacts if {relationship!r} in "
                   "c['relationships']}}\n")


def _contact_payments(world: _World, rng: random.Random) -> tuple[str, list, list[str]]:
  relationship = _relationship_with_payments(world, rng, sent=True)
  total = _total(world, relationship, sent=True)
  instruction = (f"How much money in total have I sent on Venmo to the people listed as "
                 f"'{relationship}' in my phone contacts? Answer with the number only.")
  checks = [_answer_check(f"{total:.2f}"), _payments_kept(world), _contacts_kept(world)]
  solution = [
      _prelude(("phone", "venmo")),
      _CONTACT_EMAILS.format(relationship=relationship) +
      "sent = every_page(apis.venmo.show_transactions, access_token=tokens['venmo'], "
      "direction='sent')\n"
      "total = round(sum(t['amount'] for t in sent if t['receiver']['email'] in emails), 2)\n"
      "print(total)",
      "apis.supervisor.complete_task(answer=total)"]
  return instruction, checks, solution


def _received_note(world: _World, rng: random.Random) -> tuple[str, list, list[str]]:
  relationship = _relationship_with_payments(world, rng, sent=False)
  total = _total(world, relationship, sent=False)
  title = f"Money from {relationship}"
  instruction = (f"Create a SimpleNote note titled '{title}' whose content is the total amount "
                 f"I have received on Venmo from the people listed as '{relationship}' in my "
                 "phone contacts, written with two decimals (for example 12.50) and nothing "
                 "else.")
  checks = [{"name": "the new note holds the total", "app": "simple_note",
             "sql": f"SELECT content FROM notes WHERE title = '{title}'",
             "expected": [[f"{total:.2f}"]]},
            _notes_kept(world), _payments_kept(world), _contacts_kept(world),
            _answer_check("none")]
  solution = [
      _prelude(("phone", "venmo", "simple_note")),
      _CONTACT_EMAILS.format(relationship=relationship) +
      "received = every_page(apis.venmo.show_transactions, access_token=tokens['venmo'], "
      "direction='received')\n"
      "total = sum(t['amount'] for t in received if t['sender']['email'] in emails)\n"
      "print(total)",
      f"apis.simple_note.create_note(access_token=tokens['simple_note'], title={title!r}, "
      "content=f'{total:.2f}')",
      "apis.supervisor.complete_task()"]
  return instruction, checks, solution


_Builder = Callable[[_World, random.Random], tuple[str, list, list[str]]]
# task type -> (difficulty, apps, builder)
TASK_TYPES: dict[str, tuple[int, tuple[str, ...], _Builder]] = {
    "note_lookup": (1, ("simple_note",), _note_lookup),
    "note_pin": (1, ("simple_note",), _note_pin),
    "file_sort": (2, ("file_system",), _file_sort),
    "contact_payments": (2, ("phone", "venmo"), _contact_payments),
    "received_note": (3, ("phone", "venmo", "simple_note"), _received_note),
}


def design_task(task_id: str, task_type: str, rng: random.Random, large: bool) -> TaskDesign:
  """Samples a world and builds one task of `task_type` on it.

  `large` worlds have more people, notes and payments than one page (20) of results shows,
  so solving them takes paging: more steps.
  """
  difficulty, apps, build = TASK_TYPES[task_type]
  world = (sample_world(rng, num_people=12, num_notes=26, num_payments=45) if large else
           sample_world(rng, num_people=6, num_notes=8, num_payments=12))
  instruction, checks, solution = build(world, rng)
  records = dict(world.records)
  records["supervisor"] = records["supervisor"] + [
      _row("Task", supervisor_id=1, instruction=instruction)]
  specs = {"instruction": instruction, "supervisor": world.supervisor, "datetime": TASK_DATETIME}
  return TaskDesign(task_id, task_type, difficulty, apps, specs, records, checks, solution)
