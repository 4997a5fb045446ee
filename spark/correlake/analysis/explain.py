"""`correlake explain`'s answer: each selected message's or subscription's story in the
total order, its reason and its near misses, from the views `explanations` and
`near_misses` (`sql/views/`, the one place the reasons are spelled)."""

from __future__ import annotations

import json

from correlake.analysis import audit, explain_story
from correlake.errors import UsageError

EXPLANATION = ("kind", "tenant_id", "message_key", "element_instance_key", "message_name", "reason",
               "related_message_key", "related_element_instance_key", "gap_ms")
# What a story reads besides the two views
STORY_TABLES = ("gold_messages gold_subscriptions gold_correlations gold_message_started_instances gold_as_of "
                "silver_deployments")
# the tables a story registers with only its keys' rows (`_only_their_keys`)
NARROWED_TABLES = ("gold_messages", "gold_subscriptions", "gold_correlations", "gold_message_started_instances")


def told(spark, lake: str, on_messages: dict | None, on_subscriptions: dict | None, as_json: bool,
         selection: str) -> str:
    """What `correlake explain` prints for the messages and subscriptions selected by the
    columns and values `on_messages` and `on_subscriptions` (None: none of that kind):
    their stories, or (`as_json`) one JSON array. UsageError if none matches (`selection`:
    the lake and selectors as the user gave them)."""
    from correlake.lake import catalog

    engine = audit.has_engine_records(lake)
    catalog.register(spark, lake, [f"explanations near_misses {STORY_TABLES}" + (" engine_differences" if engine else "")])

    def rows(table: str, alternatives: list[dict], *order: str) -> list[dict]:
        df = spark.table(table).where(matching(alternatives))
        return [r.asDict() for r in (df.orderBy(*order) if order else df).collect()]

    messages = rows("gold_messages", [on_messages] if on_messages else [], "published_at", "message_key")
    subscriptions = rows("gold_subscriptions", [on_subscriptions] if on_subscriptions else [],
                         "opened_at", "tenant_id", "element_instance_key", "message_name")
    if not messages and not subscriptions:
        raise UsageError(f"nothing in {selection}")
    siblings = _sibling_takes(spark.table("gold_correlations"), subscriptions)  # their keys may be others
    differences = rows("engine_differences", [{"tenant_id": m["tenant_id"], "message_key": m["message_key"]}
                                              for m in messages], "bpmn_process_id") if engine else []
    narrowed = _only_their_keys(spark, {o["correlation_key"] for o in messages + subscriptions})

    def story_rows(table: str, alternatives: list[dict], *order: str) -> list[dict]:
        if table not in narrowed:
            return rows(table, alternatives, *order)
        found = [r for r in narrowed[table] if any(all(r[c] == v for c, v in alt.items()) for alt in alternatives)]
        return sorted(found, key=lambda r: tuple(r[c] for c in order)) if order else found

    try:
        return _told(spark, story_rows, messages, subscriptions, siblings, differences, as_json)
    finally:  # the next question registers the tables it reads again, whole
        for name in NARROWED_TABLES:
            spark.catalog.dropTempView(name)


def _told(spark, rows, messages: list[dict], subscriptions: list[dict], siblings: list[dict],
          differences: list[dict], as_json: bool) -> str:
    objects = [("MESSAGE", m) for m in messages] + [("SUBSCRIPTION", s) for s in subscriptions]
    which = [_identity(dict(obj, kind=kind)) for kind, obj in objects]
    explained = {_key(r): r for r in rows("explanations", which)}
    misses: dict[tuple, list[dict]] = {}
    for r in spark.table("near_misses").where(matching(which)).collect():  # closest first, as the view orders them
        misses.setdefault(_key(r.asDict()), []).append(r.asDict())
    results = []
    for kind, obj in objects:
        key = _key(dict(obj, kind=kind))
        row = explained.get(key) or _correlated(kind, obj)
        results.append((obj, dict(row, near_misses=misses.get(key, []))))
    if as_json:
        return json.dumps([result for _, result in results], ensure_ascii=False)
    stories = explain_story.Stories(rows, messages, subscriptions, siblings, differences)
    return "\n\n".join(stories.tell(obj, result) for obj, result in results)


def _sibling_takes(correlations, subscriptions: list[dict]) -> list[dict]:
    """The correlations that closed those of `subscriptions` closed SIBLING_CORRELATED: a
    catch by another subscription of the same element instance (rule 13)."""
    closed = [s for s in subscriptions if s["close_reason"] == "SIBLING_CORRELATED"]
    if not closed:
        return []
    owners = [{"tenant_id": s["tenant_id"], "element_instance_key": s["element_instance_key"],
               "subscription_type": "CATCH"} for s in closed]
    return [r.asDict() for r in correlations.where(matching(owners)).collect()]


def folded(column):
    """A key as `near_misses` compares keys: trimmed of white space, in lower case (its SQL's expression)."""
    from pyspark.sql import functions as F

    return F.lower(F.regexp_replace(column, r"^\s+|\s+$", ""))


def _only_their_keys(spark, keys: set[str]) -> dict[str, list[dict]]:
    """Register the gold tables the views read with only the rows whose key folds to one of
    `keys`' (the selected objects'): every row a reason or a near miss of theirs can name has
    such a key (a match has their key; a near miss, their key folded or in another tenant),
    so the views answer for them as over the whole lake, from a few rows (local
    checkpoints: one read of each registered table). Returns those rows, by table."""
    from pyspark.sql import functions as F

    wanted = [folded(F.lit(k)) for k in sorted(keys)]
    narrowed = {}
    for name in NARROWED_TABLES:
        found = spark.table(name).where(folded(F.col("correlation_key")).isin(*wanted)).localCheckpoint()
        found.createOrReplaceTempView(name)
        narrowed[name] = [r.asDict() for r in found.collect()]
    return narrowed


def matching(alternatives: list[dict]):
    """A Spark condition: the columns equal to the values of one of `alternatives` (literals,
    so that Delta can skip files)."""
    from functools import reduce

    from pyspark.sql import functions as F

    def equal(values: dict):
        return reduce(lambda a, b: a & b, (F.col(column) == value for column, value in values.items()), F.lit(True))

    return reduce(lambda a, b: a | b, map(equal, alternatives)) if alternatives else F.lit(False)


def _identity(row: dict) -> dict:
    """An explained object's identifying columns, as the views name them."""
    if row["kind"] == "MESSAGE":
        return {"kind": "MESSAGE", "message_key": row["message_key"]}
    return {"kind": "SUBSCRIPTION", "tenant_id": row["tenant_id"], "element_instance_key": row["element_instance_key"],
            "message_name": row["message_name"]}


def _key(row: dict) -> tuple:
    return tuple(_identity(row).values())


def _correlated(kind: str, obj: dict) -> dict:
    """The explanation's columns for an object that correlated: no reason."""
    row = dict.fromkeys(EXPLANATION)
    row |= {"kind": kind, "tenant_id": obj["tenant_id"]}
    if kind == "MESSAGE":
        row["message_key"] = obj["message_key"]
    else:
        row |= {"element_instance_key": obj["element_instance_key"], "message_name": obj["message_name"]}
    return row


