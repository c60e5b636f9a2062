"""The scripted model behind every endpoint: deterministic, provider-neutral, a little clever.

Each wire format turns its request into a :class:`Prompt` and its reply from a :class:`Reply`.
The rules, in order:

1. the last turn carries tool results -> a text answer that uses them;
2. a tool offered in the request fits the last user message (its name or description shares a
   word with the message, the message names it, or asks to "use the tool"), or the request
   forces a tool -> call it, arguments filled from the message (proper nouns for names and
   places, numbers, enum values it mentions, the message itself for queries) or by type; one
   call per named thing when the message names several (``Paris and Rome``);
3. otherwise -> ``You said: <the message>`` (or JSON that fits a requested output schema).

Tools offered only in the system prompt (Hermes-style ``<tools>`` JSON lines, as metis's
``tool_shim`` writes them) are called with ``<tool_call>{...}</tool_call>`` tags in the text,
and ``<tool_result name=...>`` tags in a user message are read as results.

Thinking, when the request asks for it, comes first and says which rule applied. Token counts
are a quarter of the characters. A prompt cache remembers request prefixes so usage reports
cache reads and writes the way each provider does.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from metis.testing.emulator._wire import count_tokens

StopKind = Literal["end_turn", "tool_use", "max_tokens"]


@dataclass(slots=True)
class ToolSpec:
    name: str
    description: str = ""
    schema: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CallIn:
    id: str
    name: str
    args: Any = None


@dataclass(slots=True)
class ResultIn:
    call_id: str
    content: str
    name: str | None = None
    is_error: bool = False


@dataclass(slots=True)
class Turn:
    role: Literal["user", "assistant"]
    text: str = ""
    calls: list[CallIn] = field(default_factory=list)
    results: list[ResultIn] = field(default_factory=list)


@dataclass(slots=True)
class Prompt:
    """A request, provider-neutral. ``segments`` are the request's parts in prompt order
    (tools and system first, then one per message) for token counting and prefix caching;
    ``breakpoints`` the segment indexes that carry an explicit cache marker (Anthropic)."""

    model: str
    turns: list[Turn]
    system: str = ""
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str = "auto"  # auto | none | required | tool:<name>
    parallel: bool = True
    thinking: bool = False
    max_tokens: int | None = None
    output_schema: dict[str, Any] | None = None
    json_mode: bool = False
    segments: list[str] = field(default_factory=list)
    breakpoints: list[int] | None = None


@dataclass(slots=True)
class CallOut:
    name: str
    args: dict[str, Any]

    @property
    def arguments(self) -> str:
        return json.dumps(self.args, ensure_ascii=False, separators=(",", ":"))


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0  # all input, cached or not
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0  # all output, thinking included
    thinking_tokens: int = 0

    @property
    def uncached_input(self) -> int:
        return max(0, self.input_tokens - self.cache_read - self.cache_write)


@dataclass(slots=True)
class Reply:
    thinking: str = ""
    text: str = ""
    calls: list[CallOut] = field(default_factory=list)
    stop: StopKind = "end_turn"
    usage: Usage = field(default_factory=Usage)


# --- words ------------------------------------------------------------------------------------

_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "from",
        "by",
        "with",
        "about",
        "into",
        "over",
        "under",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "doing",
        "have",
        "has",
        "had",
        "having",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "it",
        "its",
        "they",
        "them",
        "their",
        "this",
        "that",
        "these",
        "those",
        "what",
        "whats",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "please",
        "tell",
        "give",
        "show",
        "let",
        "lets",
        "use",
        "call",
        "using",
        "tool",
        "tools",
        "function",
        "functions",
        "get",
        "set",
        "fetch",
        "retrieve",
        "find",
        "lookup",
        "look",
        "up",
        "current",
        "info",
        "information",
        "data",
        "value",
        "values",
        "some",
        "any",
        "all",
        "given",
        "s",
        "t",
        "new",
        "there",
        "here",
        "just",
        "also",
        "then",
        "than",
        "so",
        "very",
        "much",
        "many",
        "one",
        "like",
        "need",
        "want",
        "know",
    ]
)
_CAPITALIZED_STOP = frozenset(
    [
        "What",
        "Whats",
        "How",
        "Who",
        "Whom",
        "Whose",
        "When",
        "Where",
        "Why",
        "Which",
        "Please",
        "Can",
        "Could",
        "Would",
        "Should",
        "Will",
        "Is",
        "Are",
        "Do",
        "Does",
        "Did",
        "The",
        "A",
        "An",
        "I",
        "In",
        "On",
        "At",
        "For",
        "From",
        "By",
        "With",
        "And",
        "Or",
        "But",
        "If",
        "Use",
        "Call",
        "Tell",
        "Give",
        "Show",
        "Find",
        "Get",
        "Let",
        "Lets",
        "It",
        "This",
        "That",
        "These",
        "Those",
        "My",
        "Our",
        "Your",
        "Hi",
        "Hello",
        "Hey",
        "Thanks",
        "Thank",
        "Then",
        "Now",
        "Also",
        "Yes",
        "No",
        "Ok",
        "Okay",
        "Answer",
        "Explain",
        "Count",
        "Compute",
        "Calculate",
        "Check",
        "Search",
        "Look",
        "List",
    ]
)
_QUERY_NAMES = frozenset(
    [
        "query",
        "q",
        "search",
        "text",
        "prompt",
        "question",
        "input",
        "message",
        "content",
        "expression",
        "code",
        "command",
        "keywords",
        "keyword",
        "topic",
        "term",
        "terms",
        "sql",
        "statement",
    ]
)
_NAME_DEFAULTS: dict[str, Any] = {
    "unit": "celsius",
    "units": "metric",
    "language": "en",
    "lang": "en",
    "locale": "en-US",
    "currency": "USD",
    "email": "user@example.com",
    "url": "https://example.com",
    "timezone": "UTC",
    "format": "text",
}
_WORD = re.compile(r"[A-Za-z0-9]+")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_QUOTED = re.compile(r"[\"“']([^\"”']{2,80})[\"”']")
_PROPER = re.compile(r"\b[A-Z][\w'\-]*(?:\s+(?:de|del|da|of|von|van|la|le)?\s*[A-Z][\w'\-]*)*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _stem(word: str) -> str:
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _words(text: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(_CAMEL.sub(" ", text)) if w.lower() not in _STOP]


_COMMON_LEAD = re.compile(r"\s+(?:in|at|for|near|around|from|of|on)\b")
"""After a sentence's first word, a preposition and then a name say that word is a common noun
("Weather in Paris", "Hotels near Rome"), capitalised only because the sentence starts with it."""


def _sentence_start(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    return not before or before[-1] in ".!?:\n"


def _proper_nouns(text: str, exclude: set[str]) -> list[str]:
    out: list[str] = []
    for match in _PROPER.finditer(text):
        words = match.group(0).split()
        if (
            len(words) == 1
            and _sentence_start(text, match.start())
            and _COMMON_LEAD.match(text, match.end())
            and _PROPER.search(re.split(r"[.!?\n]", text[match.end() :], maxsplit=1)[0])
        ):
            continue  # "Weather in Paris": the name is the one after the preposition
        while words and re.sub(r"'s$|'", "", words[0]) in _CAPITALIZED_STOP:
            words.pop(0)
        name = " ".join(words).strip(" '-")
        name = re.sub(r"'s$", "", name)
        if (name and name.lower() not in exclude and name not in out and not name.isupper()) or (
            name.isupper() and len(name) > 1 and name not in out
        ):
            out.append(name)
    return out


def _schema_type(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None:
        if "properties" in schema:
            return "object"
        if "items" in schema:
            return "array"
        if schema.get("enum"):
            first = schema["enum"][0]
            return "integer" if isinstance(first, int) else "string"
        return "string"
    return str(kind).lower()


def _first_option(schema: dict[str, Any]) -> dict[str, Any]:
    for key in ("anyOf", "oneOf", "any_of", "one_of"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            typed = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            return typed[0] if typed else options[0]
    return schema


def _enum_values(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        values = schema.get("enum")
        if isinstance(values, list):
            found.update(str(v).lower() for v in values)
        for value in schema.values():
            found |= _enum_values(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= _enum_values(value)
    return found


def _inlined(node: Any, root: dict[str, Any], depth: int) -> Any:
    """``node`` with each local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) replaced by what
    it points to; a recursive reference stops, as an open object, after a few levels."""
    if isinstance(node, list):
        return [_inlined(item, root, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        if depth > 8:
            return {"type": "object"}
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        if isinstance(target, dict):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return _inlined({**target, **rest}, root, depth + 1)
    return {
        key: _inlined(value, root, depth)
        for key, value in node.items()
        if key not in ("$defs", "definitions")
    }


class _Filler:
    """Fills a JSON schema from a message: plausible, deterministic, schema-valid."""

    def __init__(self, message: str, schema: dict[str, Any]) -> None:
        self.message = message
        self.lower = message.lower()
        self.nouns = _proper_nouns(message, _enum_values(schema))
        self.numbers: list[str] = _NUMBER.findall(message)
        self.quoted = _QUOTED.findall(message)
        significant = [w for w in _WORD.findall(message) if w.lower() not in _STOP]
        self.fallback = significant[-1] if significant else "example"
        self._noun_i = 0
        self._num_i = 0

    def noun(self) -> str | None:
        if self._noun_i < len(self.nouns):
            self._noun_i += 1
            return self.nouns[self._noun_i - 1]
        return self.nouns[-1] if self.nouns else None

    def number(self) -> str | None:
        if self._num_i < len(self.numbers):
            self._num_i += 1
            return self.numbers[self._num_i - 1]
        return None

    def value(self, name: str, schema: dict[str, Any], *, entity: str | None = None) -> Any:
        schema = _first_option(schema)
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            for option in enum:
                if str(option).lower() in self.lower:
                    return option
            return enum[0]
        if "const" in schema:
            return schema["const"]
        kind = _schema_type(schema)
        if kind == "object":
            return self.object(schema)
        if kind == "array":
            items = schema.get("items")
            items = items if isinstance(items, dict) else {"type": "string"}
            if _schema_type(_first_option(items)) == "string" and len(self.nouns) > 1:
                return list(self.nouns)
            return [self.value(name, items)]
        if kind in ("integer", "number"):
            found = self.number()
            if found is None:
                default = schema.get("default", schema.get("minimum", 1))
                return default if isinstance(default, int | float) else 1
            return int(float(found)) if kind == "integer" else float(found)
        if kind == "boolean":
            default = schema.get("default")
            return default if isinstance(default, bool) else True
        if kind == "null":
            return None
        return self.string(name, schema, entity)

    def string(self, name: str, schema: dict[str, Any], entity: str | None) -> str:
        key = name.lower()
        if entity is not None:
            return entity
        if key in _QUERY_NAMES or key.endswith("_query"):
            return self.message.strip()
        if "date" in key:
            found = _DATE.search(self.message)
            return found.group(0) if found else "2025-01-01"
        if key in _NAME_DEFAULTS and not self.nouns:
            return str(_NAME_DEFAULTS[key])
        if self.quoted:
            return str(self.quoted[0])
        noun = self.noun()
        if noun is not None:
            return noun
        if isinstance(schema.get("default"), str):
            return str(schema["default"])
        examples = schema.get("examples")
        if isinstance(examples, list) and examples:
            return str(examples[0])
        return str(_NAME_DEFAULTS.get(key, self.fallback))

    def object(
        self, schema: dict[str, Any], *, entity: str | None = None, all_props: bool = False
    ) -> dict[str, Any]:
        props = schema.get("properties")
        if not isinstance(props, dict):
            return {}
        required = schema.get("required")
        wanted = set(required) if isinstance(required, list) else set()
        out: dict[str, Any] = {}
        entity_slot = self.entity_property(schema) if entity is not None else None
        for name, sub in props.items():
            if not isinstance(sub, dict):
                sub = {}
            include = all_props or name in wanted or self.mentioned(sub)
            if include:
                out[name] = self.value(name, sub, entity=entity if name == entity_slot else None)
        return out

    def mentioned(self, schema: dict[str, Any]) -> bool:
        enum = schema.get("enum")
        return isinstance(enum, list) and any(str(o).lower() in self.lower for o in enum)

    @staticmethod
    def entity_property(schema: dict[str, Any]) -> str | None:
        """The property that names the thing the call is about: the first required string
        property that is not a query or an enum."""
        props = schema.get("properties")
        if not isinstance(props, dict):
            return None
        required = schema.get("required")
        order = [p for p in (required if isinstance(required, list) else []) if p in props]
        order += [p for p in props if p not in order]
        for name in order:
            sub = props[name]
            if not isinstance(sub, dict):
                continue
            sub = _first_option(sub)
            if (
                _schema_type(sub) == "string"
                and "enum" not in sub
                and name.lower() not in _QUERY_NAMES
                and "date" not in name.lower()
                and (not isinstance(required, list) or name in required)
            ):
                return str(name)
        return None


# --- the prompt cache ---------------------------------------------------------------------------


class PromptCache:
    """Remembers request prefixes (cumulative hashes of a prompt's segments)."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._seen.clear()

    def _prefixes(self, provider: str, segments: list[str]) -> list[tuple[bytes, int]]:
        digest = hashlib.sha256(provider.encode())
        out: list[tuple[bytes, int]] = []
        tokens = 0
        for segment in segments:
            digest.update(hashlib.sha256(segment.encode()).digest())
            tokens += count_tokens(segment)
            out.append((digest.copy().digest(), tokens))
        return out

    def explicit(
        self, provider: str, segments: list[str], breakpoints: list[int]
    ) -> tuple[int, int]:
        """Anthropic: prefixes end at cache breakpoints; returns (read, written)."""
        if not breakpoints:
            return 0, 0
        prefixes = self._prefixes(provider, segments)
        marks = sorted({b for b in breakpoints if 0 <= b < len(prefixes)})
        with self._lock:
            read = 0
            for b in marks:
                key, tokens = prefixes[b]
                if key in self._seen and tokens >= self.min_tokens:
                    read = tokens
            last_key, last_tokens = prefixes[marks[-1]]
            written = 0
            if last_tokens >= self.min_tokens and last_key not in self._seen:
                written = last_tokens - read
            for b in marks:
                key, tokens = prefixes[b]
                if tokens >= self.min_tokens:
                    self._seen.add(key)
        return read, written

    def implicit(self, provider: str, segments: list[str], granularity: int = 1) -> int:
        """OpenAI and Gemini: the longest prefix seen before is read from cache."""
        prefixes = self._prefixes(provider, segments)
        with self._lock:
            read = 0
            for key, tokens in prefixes[:-1]:
                if key in self._seen and tokens >= self.min_tokens:
                    read = tokens
            for key, tokens in prefixes:
                if tokens >= self.min_tokens:
                    self._seen.add(key)
        return read - read % granularity if granularity > 1 else read


# --- the model ----------------------------------------------------------------------------------


class Responder:
    def __init__(self, *, tool_preamble: bool = False, cache: PromptCache | None = None) -> None:
        self.tool_preamble = tool_preamble
        self.cache = cache if cache is not None else PromptCache()

    def reply(self, prompt: Prompt) -> Reply:
        if not prompt.tools and "<tools>" in prompt.system:
            prompt = _unshim(prompt)
            if prompt.tools:
                return self._shimmed(prompt)
        # A user turn of attachments only (the images and files of the tool results before
        # it, where a tool message holds text only) says nothing of its own.
        said = [t for t in prompt.turns if t.role != "user" or t.text or t.results]
        last = said[-1] if said else Turn(role="user")
        message = _last_user_text(prompt.turns)
        reply = Reply()
        forced = prompt.tool_choice not in ("auto", "none") and bool(prompt.tools)
        if last.role == "user" and last.results and not forced:
            reply.text = _answer_from_results(last.results, prompt.turns)
            plan = "The tool results are in; I will answer with them."
        else:
            calls = self._choose_calls(prompt, message) if prompt.tools else []
            if calls:
                reply.calls = calls
                reply.stop = "tool_use"
                names = ", ".join(f"{c.name}({c.arguments})" for c in calls)
                plan = f"I should call {names}."
                if self.tool_preamble:
                    reply.text = f"Let me check that with {calls[0].name}."
            elif prompt.output_schema is not None or prompt.json_mode:
                reply.text = _structured(message, prompt.output_schema)
                plan = "I will answer with JSON that fits the requested schema."
            else:
                reply.text = f"You said: {message}" if message.strip() else "Hello! How can I help?"
                plan = "I will answer directly."
        if prompt.thinking:
            shown = " ".join(message.split()[:12]) or "(nothing)"
            reply.thinking = f"The user wrote: {shown}. {plan}"
        self._usage(prompt, reply)
        return reply

    def _shimmed(self, prompt: Prompt) -> Reply:
        """Tools offered in the system prompt (Hermes-style ``<tools>``), so calls are written
        as ``<tool_call>`` tags in the text, as an open model with that template would."""
        reply = self.reply(replace(prompt, system=""))
        if reply.calls:
            reply.text = "".join(
                "<tool_call>"
                + json.dumps({"name": c.name, "arguments": c.args}, ensure_ascii=False)
                + "</tool_call>"
                for c in reply.calls
            )
            reply.calls = []
            reply.stop = "end_turn"
            self._usage(prompt, reply)
        return reply

    def _choose_calls(self, prompt: Prompt, message: str) -> list[CallOut]:
        choice = prompt.tool_choice
        if choice == "none":
            return []
        tools = prompt.tools
        if choice.startswith("tool:"):
            name = choice[5:]
            tool = next((t for t in tools if t.name == name), None)
            return self._calls_for(tool, message, prompt.parallel) if tool else []
        best = _best_tool(tools, message, prompt.system)
        if best is None and (choice == "required" or _asks_for_tool(message)):
            called = {c.name for t in prompt.turns for c in t.calls}
            best = next((t for t in tools if t.name not in called), tools[0])
        return self._calls_for(best, message, prompt.parallel) if best else []

    @staticmethod
    def _calls_for(tool: ToolSpec, message: str, parallel: bool) -> list[CallOut]:
        schema = tool.schema if isinstance(tool.schema, dict) else {}
        filler = _Filler(message, schema)
        slot = _Filler.entity_property(schema)
        if slot and parallel and len(filler.nouns) > 1:
            return [
                CallOut(tool.name, _Filler(message, schema).object(schema, entity=noun))
                for noun in filler.nouns[:4]
            ]
        return [CallOut(tool.name, filler.object(schema))]

    def _usage(self, prompt: Prompt, reply: Reply) -> None:
        usage = reply.usage
        usage.input_tokens = sum(count_tokens(s) for s in prompt.segments) or 1
        usage.thinking_tokens = count_tokens(reply.thinking)
        visible = count_tokens(reply.text) + sum(count_tokens(c.arguments) + 5 for c in reply.calls)
        limit = prompt.max_tokens
        if limit is not None and usage.thinking_tokens + visible > limit:
            room = max(0, limit - usage.thinking_tokens)
            reply.calls = []
            reply.text = reply.text[: room * 4].rstrip()
            reply.stop = "max_tokens"
            visible = min(room, count_tokens(reply.text))
        usage.output_tokens = max(1, usage.thinking_tokens + visible)


_SHIM_TOOLS = re.compile(r"<tools>\s*(.*?)\s*</tools>", re.DOTALL)
_SHIM_RESULT = re.compile(r"<tool_result\b([^>]*)>(.*?)</tool_result>", re.DOTALL)
_ATTR = re.compile(r'(\w+)="([^"]*)"')


def _unshim(prompt: Prompt) -> Prompt:
    """Tools declared in the system prompt, and tool results written as user text, as real
    ones (the prompt is returned unchanged when the system prompt declares none)."""
    blocks = _SHIM_TOOLS.findall(prompt.system)  # ("listed in <tools></tools> below" too)
    tools: list[ToolSpec] = []
    for line in max(blocks, key=len, default="").splitlines():
        try:
            spec = json.loads(line)
        except ValueError:
            continue
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            schema = spec.get("parameters")
            tools.append(
                ToolSpec(
                    spec["name"],
                    str(spec.get("description") or ""),
                    schema if isinstance(schema, dict) else {},
                )
            )
    if not tools:
        return prompt
    turns: list[Turn] = []
    for turn in prompt.turns:
        found = list(_SHIM_RESULT.finditer(turn.text)) if turn.role == "user" else []
        if not found:
            turns.append(turn)
            continue
        results = []
        for tag in found:
            attrs = dict(_ATTR.findall(tag.group(1)))
            results.append(
                ResultIn(
                    attrs.get("id", ""),
                    tag.group(2).strip(),
                    attrs.get("name"),
                    attrs.get("is_error") == "true",
                )
            )
        rest = _SHIM_RESULT.sub("", turn.text).strip()
        turns.append(Turn(role="user", text=rest, results=results))
    return replace(prompt, tools=tools, turns=turns)


def _last_user_text(turns: list[Turn]) -> str:
    for turn in reversed(turns):
        if turn.role == "user" and turn.text.strip():
            return turn.text.strip()
    return ""


def _asks_for_tool(message: str) -> bool:
    return bool(re.search(r"\b(tools?|functions?)\b", message, re.IGNORECASE))


def _best_tool(tools: list[ToolSpec], message: str, system: str) -> ToolSpec | None:
    said = set(_words(message))
    lowered = message.lower()
    best: tuple[int, int] = (0, 0)
    chosen: ToolSpec | None = None
    for index, tool in enumerate(tools):
        score = 0
        if tool.name.lower() in lowered:
            score += 5
        score += 2 * len(said & set(_words(tool.name.replace("_", " ").replace("-", " "))))
        score += len(said & set(_words(tool.description)))
        if score and (score, -index) > best:
            best = (score, -index)
            chosen = tool
    if chosen is None and system:
        named = [t for t in tools if t.name and t.name in system]
        if named and _words(message):
            chosen = named[0]
    return chosen


def _call_names(turns: list[Turn]) -> dict[str, str]:
    return {c.id: c.name for t in turns for c in t.calls}


def _answer_from_results(results: list[ResultIn], turns: list[Turn]) -> str:
    names = _call_names(turns)
    sentences: list[str] = []
    for result in results:
        name = result.name or names.get(result.call_id, "the tool")
        content = " ".join(result.content.split())
        if len(content) > 300:
            content = content[:297] + "..."
        if result.is_error:
            sentence = f"{name} failed: {content or 'no details'}"
        else:
            sentence = f"According to {name}: {content or '(empty)'}"
        if not sentence.endswith((".", "!", "?")):
            sentence += "."
        sentences.append(sentence)
    return " ".join(sentences) or "The tool returned nothing."


def _structured(message: str, schema: dict[str, Any] | None) -> str:
    if not schema:
        return json.dumps({"answer": f"You said: {message}"}, ensure_ascii=False)
    schema = _inlined(schema, schema, 0)
    filler = _Filler(message, schema)
    value = (
        filler.object(schema, all_props=True)
        if _schema_type(schema) == "object"
        else filler.value("answer", schema)
    )
    return json.dumps(value, ensure_ascii=False)
