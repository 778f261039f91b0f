"""A deterministic rule-based baseline behind the LLM interface (no model at all), answering by the prompt's
template marker: a stub per sub-goal, a plan by word overlap, and a judge that is a labelled *proxy*."""

from __future__ import annotations

import json
import re
import time

from .base import LLMError, LLMResponse
from .parsing import parse_plan
from .plan_names import parse_api_docs
from .prompts import extract_section, template_of


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _wordset("""
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves also please kindly thanks thank hi hello hey dear help
    need needs want wants like love i'm i'd i've i'll we're we'd we've we'll you're you'd it's
    that's there's what's let's don't can't won't isn't aren't doesn't im id ive lets us may might must
    shall able sure near nearby via per within without much many lot lots something anything everything
    someone anyone one ones thing things way know me mine next okay ok well really just maybe
    etc e g ie eg s t
    """)
GENERIC_WORDS = _wordset("""
    get gets give find search fetch retrieve provide show tell list check look lookup suggest recommend
    share send let obtain display return returns use using make api apis data info information details
    detail endpoint endpoints result results query request requests gather collect access
    """)
_GET_VERBS = _wordset("give tell show provide fetch retrieve obtain share display send gather collect")
_NAME_SKIP = _wordset("next week weeks today tomorrow tonight weekend day days month months year years "
                      "upcoming")
_CONTEXT_START = re.compile(
    r"^(?:i'm|i am|im|we're|we are|my|our|i have|we have|i've|we've|i was|we were|it's|this is)\b", re.I)
_REQUEST_CUE = re.compile(r"\b(?:need|want|would like|'d like|like to|help|can you|could you|would you|"
                          r"please|looking for|interested in|wondering)\b", re.I)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[^a-z\s])|\s*[\n;]+\s*")
_CLAUSE_SPLIT = re.compile(r"(\s*,?\s*\b(?:as well as|and also|and then|and|also|then|plus|additionally)\b"
                           r"\s*,?\s*|\s*,\s*)", re.I)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_PLAN_LINE = re.compile(r"^\s*(\d+)\.\s+(.+?) / (.+?)(?::\s+(.*))?$")
_MAX_NAME_WORDS = 4
_MIN_CLAUSE_WORDS = 2


def words(text: str) -> list[str]:
    """Lower-case word tokens; camelCase and snake_case are split, ``'s`` is dropped."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", (text or "").replace("\u2019", "'"))
    return [w.removesuffix("'s") for w in _WORD.findall(text.lower())]


def content_words(text: str) -> list[str]:
    """Words that are not stopwords or numbers (order kept, repeats kept)."""
    return [w for w in words(text) if w not in STOPWORDS and not w.isdigit() and len(w) > 1]


def _stem(word: str) -> str:
    """Light plural stemming: ``hotels -> hotel``, ``cities -> city``."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def overlap_terms(text: str) -> set[str]:
    """Stemmed content words minus generic verbs and API boilerplate, for overlap scoring."""
    return {_stem(w) for w in content_words(text) if w not in GENERIC_WORDS}


def _merge_short(pieces: list[str], delims: list[str]) -> list[str]:
    """Join clauses with fewer than two content words onto a neighbour (previous, else next)."""
    merged: list[str] = []
    carry = ""
    for i, piece in enumerate(pieces):
        short = len(content_words(piece)) < _MIN_CLAUSE_WORDS
        if merged and short:
            merged[-1] = merged[-1] + delims[i - 1] + piece
        elif short and i < len(pieces) - 1:
            carry += piece + delims[i]
        else:
            merged.append(carry + piece)
            carry = ""
    return merged


def _tidy(piece: str) -> str:
    """A clause without surrounding whitespace, punctuation and leading conjunctions."""
    piece = " ".join(piece.split()).strip(" ,;:.!?")
    piece = re.sub(r"^(?:and|also|then|plus|as well as)\b[\s,]*", "", piece, flags=re.IGNORECASE)
    return piece.strip(" ,;:.!?")


def split_subgoals(query: str) -> list[str]:
    """Sub-goals of a request: sentences split into clauses (``and``, ``then``, commas; short ones merged);
    first-person scene-setting (``I'm planning a trip``) is dropped unless nothing else is left."""
    pieces: list[str] = []
    for sentence in _SENTENCE_SPLIT.split(query or ""):
        if content_words(sentence):
            parts = _CLAUSE_SPLIT.split(sentence)
            pieces.extend(_tidy(c) for c in _merge_short(parts[0::2], parts[1::2]))
    pieces = [p for p in pieces if content_words(p)]
    return [p for p in pieces if not (_CONTEXT_START.match(p) and not _REQUEST_CUE.search(p))] or pieces


def stub_name(subgoal: str) -> str:
    """A Title-Case API-style name from a sub-goal's first content words (``Get Weather Forecast``)."""
    out: list[str] = []
    for w in content_words(subgoal):
        if w in _NAME_SKIP:
            continue
        w = "get" if w in _GET_VERBS else w
        if out and out[-1].lower() == w:
            continue
        out.append(w.replace("'", "").capitalize())
        if len(out) >= _MAX_NAME_WORDS:
            break
    return " ".join(out)


def stubs_reply(query: str) -> str:
    """JSON list of ``{name, reasoning}`` stubs, one per sub-goal (empty list when none)."""
    stubs: dict[str, dict] = {}
    for goal in split_subgoals(query):
        if name := stub_name(goal):
            stubs.setdefault(name.lower(), {"name": name, "reasoning": goal})
    return json.dumps(list(stubs.values()))


def plan_reply(query: str, docs: list[dict]) -> str:
    """JSON plan: per sub-goal, the listed API with the largest word overlap (ties: earlier listed)."""
    doc_terms = [overlap_terms(f"{d['tool_name']} {d['api_name']} {d['category']} {d['api_description']}")
                 for d in docs]
    steps, used = [], set()
    for goal in split_subgoals(query):
        terms = overlap_terms(goal)
        scores = [len(terms & t) for t in doc_terms]
        best = scores.index(max(scores)) if any(scores) else None
        if best is None or best in used:
            continue
        used.add(best)
        steps.append({"step": len(steps) + 1, "tool_name": docs[best]["tool_name"],
                      "api_name": docs[best]["api_name"], "purpose": goal})
    reason = (f"{len(steps)} API(s) matched by word overlap" if steps
              else "no listed API shares a content word with the request")
    return json.dumps({"refusal": not steps, "reason": reason, "steps": steps})


def _plan_from_text(text: str) -> tuple[list[dict], bool]:
    """Steps and refusal flag from a judge prompt's plan section (numbered lines or JSON)."""
    text = (text or "").strip()
    if text.upper().startswith("REFUSED"):
        return [], True
    lines = map(_PLAN_LINE.match, text.splitlines())
    steps = [{"tool_name": m.group(2), "api_name": m.group(3)} for m in lines if m]
    if steps:
        return steps, False
    plan = parse_plan(text)
    return plan.steps, plan.refusal


def judge_reply(query: str, plan_text: str) -> str:
    """JSON verdict of the proxy: Solved when no refusal and each sub-goal shares a word with a named API."""
    steps, refused = _plan_from_text(plan_text)
    goals = [g for g in split_subgoals(query) if overlap_terms(g)]
    step_terms = [overlap_terms(f"{s.get('tool_name', '')} {s.get('api_name', '')}") for s in steps]
    covered = sum(1 for g in goals if any(overlap_terms(g) & t for t in step_terms))
    solved = not refused and bool(steps) and bool(goals) and covered == len(goals)
    reason = ("proxy: plan is a refusal" if refused
              else f"proxy: {covered}/{len(goals)} sub-goals share a word with a named API")
    return json.dumps({"verdict": "Solved" if solved else "Unsolved", "reason": reason})


class RulesBackend:
    """Deterministic rule-based stand-in for an LLM (``is_llm`` is False)."""

    name = "rules"
    model = "rules-v1"
    is_llm = False

    def generate(self, prompt: str, system: str = "", json_schema: dict | None = None,
                 temperature: float = 0.0, run: int = 0) -> LLMResponse:
        """Answer a rendered template prompt by rules (whitespace tokens counted; ``run`` is ignored)."""
        start = time.perf_counter()
        found = template_of(prompt)
        if found is None:
            raise LLMError("rules backend: prompt has no '# task:' marker line")
        task, version = found
        query, apis, plan = (extract_section(prompt, tag) or "" for tag in ("query", "apis", "plan"))
        replies = {"stubs": lambda: stubs_reply(query), "judge": lambda: judge_reply(query, plan),
                   "plan": lambda: plan_reply(query, parse_api_docs(apis, params=True))}
        if task not in replies:
            raise LLMError(f"rules backend: unknown template {version!r}")
        text = replies[task]()
        return LLMResponse(text=text, tokens_in=len(prompt.split()) + len(system.split()),
                           tokens_out=len(text.split()), latency_s=time.perf_counter() - start,
                           model=self.model, backend=self.name)
