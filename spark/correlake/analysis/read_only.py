"""`correlake sql`'s guard: a statement runs only if its parsed plan, before Spark analyses
anything, is on an allow-list — a query over the lake's tables and views, or SHOW TABLES,
SHOW VIEWS, SHOW COLUMNS, DESCRIBE or EXPLAIN of one — and calls only the built-in
functions of `allowed.py`, the options of those that take a parser's options among the
keys it allows. Anything else (INSERT, DELETE, SET, EXECUTE IMMEDIATE, a file's path as a
table, reflect(), xpath(), from_xml's rowValidationXSDPath, a user's function…) is
refused, its reason named.

The parsed plan is walked through every field of every node (children, expressions,
subqueries, CTE definitions, window definitions): what is not known is refused."""

from __future__ import annotations

import difflib

from correlake.analysis import allowed
from correlake.errors import UsageError

_LOGICAL = "org.apache.spark.sql.catalyst.plans.logical."
_ANALYSIS = "org.apache.spark.sql.catalyst.analysis."
_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions."

# The plan nodes of a query, and of the few statements that only read.
PLANS = frozenset({
    *(_LOGICAL + name for name in (
        "Project", "Filter", "Aggregate", "Join", "LateralJoin", "Sort", "GlobalLimit", "LocalLimit", "Offset",
        "Union", "Intersect", "Except", "Distinct", "SubqueryAlias", "UnresolvedWith", "WithWindowDefinition",
        "LimitAll", "Generate", "OneRowRelation", "LocalRelation", "Sample", "Pivot", "Unpivot", "UnresolvedHint",
        "RepartitionByExpression",
        "ShowTables", "ShowViews", "ShowColumns", "DescribeRelation", "DescribeColumn")),
    *(_ANALYSIS + name for name in (
        "UnresolvedRelation", "UnresolvedInlineTable", "UnresolvedTableValuedFunction", "UnresolvedTVFAliases",
        "UnresolvedSubqueryColumnAliases", "UnresolvedHaving", "UnresolvedQualify", "UnresolvedTableOrView",
        "CurrentNamespace$")),
    _EXPRESSIONS + "PipeOperator",  # FROM t |> WHERE …
    "org.apache.spark.sql.execution.command.ExplainCommand",  # its plan is walked too
})
# Expressions: any of Spark's own (package catalyst.expressions; the parser makes no call
# of code out of them), and these of the parser's unresolved ones; functions are checked by name.
EXPRESSIONS = frozenset(_ANALYSIS + name for name in (
    "UnresolvedAttribute", "UnresolvedStar", "UnresolvedStarExceptOrReplace", "UnresolvedRegex", "UnresolvedAlias",
    "UnresolvedExtractValue", "UnresolvedOrdinal", "UnresolvedPipeAggregateOrdinal", "UnresolvedFunction",
    "UnresolvedGenerator"))
STATEMENTS = "SELECT, WITH, VALUES, SHOW TABLES|VIEWS|COLUMNS, DESCRIBE, EXPLAIN"
# The statements a refusal names in SQL's words (else by the parser's name of its plan).
SQL_WORDS = {
    "InsertIntoDir": "INSERT OVERWRITE DIRECTORY", "InsertIntoStatement": "INSERT", "DeleteFromTable": "DELETE",
    "UpdateTable": "UPDATE", "MergeIntoTable": "MERGE", "DropTable": "DROP TABLE", "DropView": "DROP VIEW",
    "CreateTable": "CREATE TABLE", "CreateTableAsSelect": "CREATE TABLE AS SELECT", "ReplaceTable": "REPLACE TABLE",
    "CreateView": "CREATE VIEW", "CreateViewCommand": "CREATE VIEW", "TruncateTable": "TRUNCATE TABLE",
    "CacheTable": "CACHE TABLE", "UncacheTable": "UNCACHE TABLE", "SetCommand": "SET", "ResetCommand": "RESET",
    "AddJarsCommand": "ADD JAR", "UnresolvedExecuteImmediate": "EXECUTE IMMEDIATE", "VacuumTableCommand": "VACUUM",
    "OptimizeTableCommand": "OPTIMIZE", "RestoreTableStatement": "RESTORE", "RefreshTable": "REFRESH TABLE",
    "SetCatalogAndNamespace": "USE", "CreateVariable": "DECLARE", "CompoundBody": "BEGIN … END",
}


class Refused(UsageError):
    """A statement that is not a read of the lake's tables and views (exit 2)."""

    def __init__(self, reason: str):
        super().__init__(f"refused: {reason}; correlake sql only reads ({STATEMENTS})")


def parse(spark, text: str):
    """The statement's parsed (unresolved) plan; Spark's ParseException if it is not SQL."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import convert_exception

    try:
        return spark._jsparkSession.sessionState().sqlParser().parsePlan(text)
    except Py4JJavaError as exc:
        raise convert_exception(exc.java_exception) from None


def query(spark, text: str, names, known=()):
    """The statement's DataFrame, made of the very plan checked; Refused, before anything is
    analysed or run, unless it is on the allow-list and reads only `names` (the tables and
    views registered for it) and its own CTEs. `known`: the names a lake may have, for the
    refusal's hint."""
    from pyspark.sql import DataFrame

    plan = parse(spark, text)
    _Walk(spark._jvm, {name.lower() for name in names}, {name.lower() for name in known}).node(plan, frozenset())
    return DataFrame(spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan), spark)


class _Walk:
    # what a value of the plan is, by the first of these it is an instance of (else a leaf)
    KINDS = {"plan": "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan",
             "expression": "org.apache.spark.sql.catalyst.expressions.Expression",
             "leaf": "org.apache.spark.sql.types.DataType", "iterable": "scala.collection.Iterable",
             "product": "scala.Product"}

    def __init__(self, jvm, names: set[str], known: set[str]):
        self.jvm = jvm
        self.names, self.known = names, known
        self.bases = {kind: jvm.java.lang.Class.forName(base) for kind, base in self.KINDS.items()}
        self.kinds: dict[str, str] = {}  # class name -> kind

    def _kind(self, name: str, obj) -> str:
        if name not in self.kinds:
            cls = obj.getClass()
            self.kinds[name] = next((kind for kind, base in self.bases.items() if base.isAssignableFrom(cls)), "leaf")
        return self.kinds[name]

    def node(self, obj, ctes: frozenset[str]) -> None:
        """Check `obj` (a plan, an expression or a value in one) and all it holds."""
        from py4j.java_gateway import JavaObject

        if not isinstance(obj, JavaObject):  # a string, a number: py4j converted it
            return
        name = self._class(obj)
        kind = self._kind(name, obj)
        short = name.rpartition(".")[2].rstrip("$")
        if kind == "plan":
            if name not in PLANS:
                raise Refused(f"{SQL_WORDS.get(short, short)} is not a query")
            if short == "UnresolvedWith":
                return self._with(obj, ctes)
            self._plan(obj, short, ctes)
        elif kind == "expression":
            if name not in EXPRESSIONS and name.rpartition(".")[0] + "." != _EXPRESSIONS:
                raise Refused(f"{short} is not allowed in a query")
            if short in ("UnresolvedFunction", "UnresolvedGenerator"):
                self._function(obj, short)
        elif kind == "iterable":
            elements = obj.iterator()
            while elements.hasNext():
                self.node(elements.next(), ctes)
            return
        elif kind != "product":
            return
        for i in range(obj.productArity()):
            self.node(obj.productElement(i), ctes)

    def _plan(self, plan, short: str, ctes: frozenset[str]) -> None:
        if short == "UnresolvedRelation":
            if not plan.options().isEmpty() or plan.isStreaming():
                raise Refused("a relation's options or STREAM")
            self._name(plan.multipartIdentifier(), ctes)
        elif short == "UnresolvedTableOrView":
            self._name(plan.multipartIdentifier(), frozenset())
        elif short == "ShowColumns" and plan.namespace().isDefined():
            raise Refused("SHOW COLUMNS of another namespace")
        elif short == "UnresolvedTableValuedFunction":
            parts = _strings(plan.name())
            name = parts[-1].lower()
            if len(parts) == 1 and name in allowed.REFUSED_FUNCTIONS:
                raise Refused(f"table function {name}() {allowed.REFUSED_FUNCTIONS[name]}")
            if len(parts) != 1 or name not in allowed.TABLE_FUNCTIONS:
                raise Refused(f"table function {'.'.join(parts)}() (allowed: {', '.join(sorted(allowed.TABLE_FUNCTIONS))})")

    def _with(self, plan, ctes: frozenset[str]) -> None:
        """WITH: each CTE sees those before it (and itself: RECURSIVE), the query all of them."""
        relations = plan.cteRelations()
        for i in range(relations.size()):
            name, relation = relations.apply(i)._1(), relations.apply(i)._2()
            ctes |= {name.lower()}
            self.node(relation, ctes)
        self.node(plan.child(), ctes)

    def _name(self, identifier, ctes: frozenset[str]) -> None:
        parts = _strings(identifier)
        if len(parts) != 1:
            raise Refused(f"{'.'.join(parts)} is not a table or view of the lake (a path, or another catalog's)")
        if parts[0].lower() in self.known - self.names - ctes:
            raise Refused(f"this lake has no {parts[0]} (`correlake sql --list` names what it has)")
        if parts[0].lower() not in self.names | ctes:
            near = difflib.get_close_matches(parts[0].lower(), sorted(self.names | self.known | ctes), n=1, cutoff=0.8)
            meant = f"did you mean {near[0]}? " if near else ""
            raise Refused(f"{parts[0]} is not a table or view of the lake ({meant}`correlake sql --list` names them)")

    def _function(self, expression, short: str) -> None:
        if short == "UnresolvedGenerator":  # LATERAL VIEW f(…)
            identifier = expression.name()
            parts, arguments = [*_strings(identifier.database()), identifier.funcName()], expression.children()
        else:
            parts, arguments = _strings(expression.nameParts()), expression.arguments()
        name = parts[-1].lower()
        if len(parts) != 1:
            raise Refused(f"{'.'.join(parts)}(): a function is called by its bare name")
        if name in allowed.REFUSED_FUNCTIONS:
            raise Refused(f"{name}() {allowed.REFUSED_FUNCTIONS[name]}")
        if name not in allowed.FUNCTIONS:
            raise Refused(f"{name}() is not one of Spark's built-in functions that correlake sql allows")
        if name in allowed.OPTION_FUNCTIONS:
            self._options(name, _elements(arguments))

    def _options(self, function: str, arguments: list) -> None:
        """A parser's options: given as map('key', 'value', …) with literal keys, each allowed."""
        at, parser = allowed.OPTION_FUNCTIONS[function]
        keys_allowed = {key.lower() for key in allowed.OPTIONS[parser]}
        refused = {key.lower(): f"{key} {why}" for key, why in allowed.REFUSED_OPTIONS.get(parser, {}).items()}
        keys = [self._keys(given) for given in arguments[at:]]
        if None in keys or any(self._class(given).endswith(".NamedArgumentExpression") for given in arguments):
            raise Refused(f"{function}()'s options are given as map('key', 'value', …) with literal keys")
        for key in (key for given in keys for key in given):
            if key.lower() in refused:
                raise Refused(f"{function}()'s option {refused[key.lower()]}")
            if key.lower() not in keys_allowed:
                raise Refused(f"{function}()'s option {key} is not one correlake sql allows")

    def _keys(self, expression) -> list[str] | None:
        """The keys of map('key', 'value', …), or None if it is not that, with string literals as keys."""
        if not (self._class(expression).endswith(".UnresolvedFunction")
                and [part.lower() for part in _strings(expression.nameParts())] == ["map"]):
            return None
        keys = _elements(expression.arguments())[::2]
        strings = [key.value() for key in keys if self._class(key).endswith(".Literal") and key.value() is not None]
        if len(strings) != len(keys) or any(self._class(s) != "org.apache.spark.unsafe.types.UTF8String" for s in strings):
            return None
        return [str(key) for key in strings]

    def _class(self, obj) -> str:
        return self.jvm.org.apache.commons.lang3.ClassUtils.getName(obj)


def _elements(values) -> list:
    """A Scala Seq or Option, as a list."""
    elements = values.iterator()
    found = []
    while elements.hasNext():
        found.append(elements.next())
    return found


def _strings(values) -> list[str]:
    """A Scala Seq or Option of strings, as a list."""
    return [str(value) for value in _elements(values)]
