"""Writes task worlds in AppWorld's own layout from a JSON design; runs in the AppWorld venv.

  <appworld venv>/bin/python build.py BASE_ROOT [DESIGN.json]   (APPWORLD_ROOT: the output root)

BASE_ROOT/data caches, built once, the API docs (from the decrypted app code) and the base
databases (every app's schema, plus the docs as rows of the api_docs app); they are copied to
$APPWORLD_ROOT/data. Then, for each task of the design, it writes `tasks/<id>/specs.json` and
`tasks/<id>/dbs/` (the base plus the design's records). A design task: {"task_id", "specs":
{instruction, supervisor, datetime}, "records": {app: [{"model": name, "fields": {...}}]}};
string values of `*_at` fields are ISO datetimes; an `id` field is checked, not set (the engine
assigns ids in insertion order).
"""

import contextlib
import json
import os
import shutil
import sys

from appworld.apps import get_all_apps
from appworld.apps.api_lib import set_local_dbs
from appworld.collections.api_docs import ApiDocCollection
from appworld.common.constants import CANARY_STRING, DB_VERSION
from appworld.common.datetime import DateTime
from appworld.common.path_store import path_store
from appworld.common.utils import import_models_module


@contextlib.contextmanager
def _library_root(root):
  """The library reads and writes under path_store's <root>/data."""
  previous = path_store.root
  path_store.update_root(root)
  try:
    yield os.path.join(root, "data")
  finally:
    path_store.update_root(previous)


def _build_base(base_root):
  """Builds `base_root/data/{api_docs,base_dbs}` unless already complete."""
  with _library_root(base_root) as data:
    base = os.path.join(data, "base_dbs")
    if os.path.exists(os.path.join(base, "complete")):
      return
    docs = ApiDocCollection.build(tuple(get_all_apps(skip_admin=True)))
    # Worlds read the standard format; the library's own save() also writes an OpenAPI form
    # that needs a validator package the engine does not install.
    standard = os.path.join(data, "api_docs", "standard")
    os.makedirs(standard, exist_ok=True)
    for app_name, api_name_to_doc in docs.items():
      marked = {name: {**doc, "canary_string": CANARY_STRING}
                for name, doc in api_name_to_doc.items()}
      with open(os.path.join(standard, app_name + ".json"), "w") as f:
        json.dump(marked, f)
    os.makedirs(base, exist_ok=True)
    set_local_dbs(to_db_home_path=base, from_db_home_path=base, app_names=get_all_apps(),
                  create=True)
    doc_model = import_models_module("api_docs").ApiDoc
    for app_name, api_name_to_doc in docs.items():
      for api_name, doc in api_name_to_doc.items():
        doc_model(app_name_=app_name, api_name=api_name, path=doc["path"], method=doc["method"],
                  description=doc["description"], parameters=doc["parameters"],
                  response_schemas=doc["response_schemas"]).save()
    with open(os.path.join(base, "complete"), "w") as f:
      f.write(DB_VERSION)


def _build_task(data, task):
  folder = os.path.join(data, "tasks", task["task_id"])
  dbs = os.path.join(folder, "dbs")
  os.makedirs(dbs, exist_ok=True)
  set_local_dbs(to_db_home_path=dbs, from_db_home_path=os.path.join(data, "base_dbs"),
                app_names=get_all_apps(), create=True)
  for app_name, records in task["records"].items():
    models = import_models_module(app_name)
    for record in records:
      fields = {name: DateTime.fromisoformat(value)
                if name.endswith("_at") and isinstance(value, str) else value
                for name, value in record["fields"].items()}
      expected_id = fields.pop("id", None)
      row = getattr(models, record["model"])(**fields)
      row.save()
      if expected_id is not None and row.id != expected_id:
        raise ValueError(f"{app_name}.{record['model']} got id {row.id}, the design says "
                         f"{expected_id}")
  with open(os.path.join(folder, "specs.json"), "w") as f:
    json.dump({**task["specs"], "db_version": DB_VERSION}, f, indent=1)


def main():
  base_root, design_paths = sys.argv[1], sys.argv[2:]
  _build_base(base_root)
  if not design_paths:
    return
  with open(design_paths[0]) as f:
    design = json.load(f)
  data = os.path.join(path_store.root, "data")
  for folder in ("api_docs", "base_dbs"):
    if not os.path.exists(os.path.join(data, folder)):
      shutil.copytree(os.path.join(base_root, "data", folder), os.path.join(data, folder))
  for task in design:
    _build_task(data, task)
  print(f"built {len(design)} task worlds under {data}")


if __name__ == "__main__":
  main()
