"""A model call's messages, read from its span's payloads for the console's chat view.

The clients report a conversation in several forms; :func:`conversation` reads each of them
into one list of :class:`Turn` in order (the prompt's messages, then the answer):

- OpenAI chat: ``messages`` (``role``, ``content`` as text or parts, ``tool_calls`` with a
  ``function``, ``tool`` messages with a ``tool_call_id``), the answer as ``choices[].message``
  or as the message itself (``content``, ``tool_calls``: LangChain's result);
- Anthropic: ``system``, ``messages`` whose ``content`` is text or blocks (``text``,
  ``tool_use``, ``tool_result``), the answer's ``content`` blocks;
- OpenTelemetry GenAI conventions: ``gen_ai.system_instructions``, ``gen_ai.input.messages``
  and ``gen_ai.output.messages`` (messages of ``parts``: ``text``, ``tool_call``,
  ``tool_call_response``), as literal dotted keys, nested objects or JSON text (what an
  OTLP attribute holds), and the older ``gen_ai.prompt`` / ``gen_ai.completion`` text;
- a bare ``prompt`` text, and a ``completion``, ``output`` or ``text`` answer.

A sensitive value stays a :class:`Part` of kind ``value`` holding the redacted marker and its
JSON pointer, so the page shows it redacted with its reveal button, never its value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import attrs

from governance_core.rules.sensitive import MARKER_KEY

__all__ = ["JSON_TEXT_LIMIT", "Part", "Turn", "conversation"]

JSON_TEXT_LIMIT: Final = 1_000_000
"""The longest JSON text (an OTLP attribute's messages) read as messages; longer is text."""

_TURN_LIMIT: Final = 500
"""The most turns shown; a longer conversation ends with a note that it was cut."""


@attrs.frozen
class Part:
    """One piece of a turn.

    ``kind`` is ``text`` (``text``), ``tool_call`` (``name``, ``call_id``, arguments in
    ``value``), ``tool_result`` (``call_id``, ``value``) or ``value`` (any other JSON value,
    a sensitive marker included, shown folded). ``pointer`` is the JSON pointer of ``value``
    in the span (``/payload/...``), empty when it came from JSON text.
    """

    kind: str
    text: str | None = None
    name: str | None = None
    call_id: str | None = None
    value: Any = None
    pointer: str = ""


@attrs.frozen
class Turn:
    """One message: its role (``system``, ``user``, ``assistant``, ``tool``, …) and parts."""

    role: str
    parts: tuple[Part, ...]
    call_id: str | None = None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _at(pointer: str, *keys: object) -> str:
    """``pointer`` extended by ``keys``; empty stays empty (a value read from JSON text)."""
    if not pointer:
        return ""
    return pointer + "".join(f"/{_escape(str(key))}" for key in keys)


def _is_marker(value: object) -> bool:
    return isinstance(value, Mapping) and MARKER_KEY in value


def _decoded(value: Any) -> tuple[Any, bool]:
    """``value``, parsed when it is JSON text of an array or object; whether it was parsed."""
    if isinstance(value, str) and len(value) <= JSON_TEXT_LIMIT:
        text = value.strip()
        if text[:1] in ("[", "{"):
            try:
                return json.loads(text), True
            except ValueError:
                return value, False
    return value, False


def _member(document: object, dotted: str, pointer: str) -> tuple[Any, str]:
    """The member ``dotted`` of ``document``: a literal dotted key, else a nested path."""
    if not isinstance(document, Mapping):
        return None, ""
    if dotted in document:
        return document[dotted], f"{pointer}/{_escape(dotted)}"
    node: Any = document
    path = pointer
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None, ""
        node = node[key]
        path = f"{path}/{_escape(key)}"
    return node, path


def _text_of(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _block(item: Any, pointer: str) -> list[Part]:
    """One content block or GenAI part."""
    if isinstance(item, str):
        return [Part("text", text=item)]
    if not isinstance(item, Mapping) or _is_marker(item):
        return [Part("value", value=item, pointer=pointer)]
    kind = item.get("type")
    if kind == "text" or (kind is None and set(item) <= {"text", "type"} and "text" in item):
        text = item.get("text", item.get("content"))
        if _is_marker(text):
            key = "text" if "text" in item else "content"
            return [Part("value", value=text, pointer=_at(pointer, key))]
        if isinstance(text, str):
            return [Part("text", text=text)]
    if kind in ("tool_use", "tool_call", "function_call"):
        key = "input" if "input" in item else "arguments"
        return [Part("tool_call", name=_text_of(item.get("name")),
                     call_id=_text_of(item.get("id")), value=item.get(key),
                     pointer=_at(pointer, key))]
    if kind in ("tool_result", "tool_call_response"):
        key = "content" if "content" in item else "response"
        return [Part("tool_result", call_id=_text_of(item.get("tool_use_id", item.get("id"))),
                     value=item.get(key), pointer=_at(pointer, key))]
    return [Part("value", value=item, pointer=pointer)]


def _content(value: Any, pointer: str) -> list[Part]:
    """A message's content: text, a list of blocks or parts, or another value."""
    if value is None:
        return []
    if isinstance(value, str):
        return [Part("text", text=value)] if value else []
    if isinstance(value, list):
        return [part for index, item in enumerate(value)
                for part in _block(item, _at(pointer, index))]
    return [Part("value", value=value, pointer=pointer)]


def _tool_calls(message: Mapping[str, Any], pointer: str) -> list[Part]:
    """An OpenAI message's ``tool_calls`` (and the older single ``function_call``)."""
    calls = message.get("tool_calls")
    found: list[tuple[Any, str]] = []
    if isinstance(calls, list):
        found = [(call, _at(pointer, "tool_calls", index)) for index, call in enumerate(calls)]
    if isinstance(message.get("function_call"), Mapping):
        found.append((message["function_call"], _at(pointer, "function_call")))
    parts = []
    for call, path in found:
        if not isinstance(call, Mapping):
            parts.append(Part("value", value=call, pointer=path))
            continue
        function = call.get("function")
        if isinstance(function, Mapping):
            path, source = _at(path, "function"), function
        else:
            source = call
        key = "arguments" if "arguments" in source else "args"
        parts.append(Part("tool_call", name=_text_of(source.get("name")),
                          call_id=_text_of(call.get("id")), value=source.get(key),
                          pointer=_at(path, key)))
    return parts


def _message(message: Any, pointer: str, default_role: str) -> Turn | None:
    """One message of any form, or None when it holds nothing to show."""
    if message is None:
        return None
    if isinstance(message, str):
        return Turn(default_role, (Part("text", text=message),)) if message else None
    if not isinstance(message, Mapping) or _is_marker(message):
        return Turn(default_role, (Part("value", value=message, pointer=pointer),))
    role = message.get("role") if isinstance(message.get("role"), str) else default_role
    parts = [
        *_content(message.get("content"), _at(pointer, "content")),
        *_content(message.get("parts"), _at(pointer, "parts")),
        *_tool_calls(message, pointer),
    ]
    if not parts:
        return None
    return Turn(str(role), tuple(parts), _text_of(message.get("tool_call_id")))


def _messages(value: Any, pointer: str, default_role: str) -> list[Turn]:
    """A list of messages (or one message, or JSON text of them)."""
    if value is None:
        return []
    value, parsed = _decoded(value)
    path = "" if parsed else pointer
    if _is_marker(value):
        return [Turn(default_role, (Part("value", value=value, pointer=path),))]
    if isinstance(value, list):
        turns = [_message(item, _at(path, index), default_role)
                 for index, item in enumerate(value)]
        return [turn for turn in turns if turn is not None]
    turn = _message(value, path, default_role)
    return [] if turn is None else [turn]


def _system(value: Any, pointer: str) -> list[Turn]:
    value, parsed = _decoded(value)
    parts = _content(value, "" if parsed else pointer)
    return [Turn("system", tuple(parts))] if parts else []


def _prompt(payload: object) -> list[Turn]:
    turns: list[Turn] = []
    value, path = _member(payload, "system", "/payload")
    turns += _system(value, path)
    value, path = _member(payload, "gen_ai.system_instructions", "/payload")
    turns += _system(value, path)
    for key in ("messages", "gen_ai.input.messages", "llm.input_messages", "gen_ai.prompt"):
        value, path = _member(payload, key, "/payload")
        turns += _messages(value, path, "user")
    if not turns:
        value, path = _member(payload, "prompt", "/payload")
        turns += _messages(value, path, "user")
    return turns


def _choices(value: list[Any], pointer: str) -> list[Turn]:
    """OpenAI's ``choices``: each one's ``message`` (or legacy ``text``)."""
    turns: list[Turn] = []
    for index, choice in enumerate(value):
        path = _at(pointer, index)
        if isinstance(choice, Mapping):
            key = "message" if "message" in choice else "text"
            turns += _messages(choice.get(key), _at(path, key), "assistant")
        else:
            turns += _messages(choice, path, "assistant")
    return turns


def _answer(result: object) -> list[Turn]:
    for key in ("choices", "gen_ai.output.messages", "llm.output_messages", "gen_ai.completion"):
        value, path = _member(result, key, "/result_payload")
        turns = (_choices(value, path) if key == "choices" and isinstance(value, list)
                 else _messages(value, path, "assistant"))
        if turns:
            return turns
    if not isinstance(result, Mapping):
        return []
    if isinstance(result.get("message"), Mapping):
        return _messages(result["message"], "/result_payload/message", "assistant")
    if "content" in result or "tool_calls" in result:
        turn = _message(result, "/result_payload", "assistant")
        return [] if turn is None else [turn]
    for key in ("completion", "output", "text"):
        if isinstance(result.get(key), str) or _is_marker(result.get(key)):
            return _messages(result[key], f"/result_payload/{key}", "assistant")
    return []


def conversation(
    payload: object, result_payload: object, *, model_call: bool = False
) -> list[Turn] | None:
    """The span's conversation in order, or None when its payloads hold no messages.

    A span is read as a conversation when its payload holds a prompt (messages, a system
    text or a prompt), or, for a ``model_call`` (a span reporting token usage), when its
    result holds an answer: a tool span's ``content`` result is not taken for a model's.
    """
    turns = _prompt(payload)
    if not turns and not model_call:
        return None
    turns += _answer(result_payload)
    if not turns:
        return None
    if len(turns) > _TURN_LIMIT:
        cut = len(turns) - _TURN_LIMIT
        turns = [*turns[:_TURN_LIMIT], Turn("note", (Part("text", text=f"{cut} more messages "
                                                           "not shown"),))]
    return turns
