#!/usr/bin/env python3
"""Validate OCSF events (one JSON object per line in FILE) against the OCSF JSON schema of
their class, as the PyPI package `ocsf-json-schema` generates it for the version each event
names in metadata.version, and JSON Schema draft 2020-12 (PyPI `jsonschema`).

  validate.py FILE    exit 0 when every event is valid; else each error on stderr, exit 1
"""
import json
import sys

from jsonschema import Draft202012Validator
from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema


def main(path):
    schemas = {}
    bad = 0
    n = 0
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            n += 1
            event = json.loads(line)
            version = event["metadata"]["version"]
            key = (version, event["class_uid"])
            if key not in schemas:
                ocsf = OcsfJsonSchemaEmbedded(get_ocsf_schema(version=version))
                name = ocsf.lookup_class_name_from_uid(class_uid=event["class_uid"])
                schemas[key] = Draft202012Validator(ocsf.get_class_schema(class_name=name, profiles=[]))
            for err in schemas[key].iter_errors(event):
                bad += 1
                where = "/".join(str(p) for p in err.absolute_path)
                print(f"line {lineno} (class {event['class_uid']}): {where}: {err.message}", file=sys.stderr)
    print(f"{n} events, {bad} errors")
    return 1 if bad or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
