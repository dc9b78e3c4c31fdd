"""Skills (Eino's ``adk/middlewares/skill`` tests, ported): SKILL.md parsing (safe YAML only), the tool's
listing, inline / fork / fork_with_context, and typed errors naming a malformed skill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adk import ChatModelAgent, Runner
from adk.errors import SkillError
from adk.middlewares import InMemoryBackend, SkillMiddleware
from adk.middlewares._skill_prompts import SYSTEM_PROMPT, TOOL_DESCRIPTION_BASE
from adk.middlewares.skill import load_skills, parse_skill
from compose.models import ScriptedChatModel
from tests.adk.helpers import call, calling, collect

pytestmark = pytest.mark.anyio

PDF = "---\nname: pdf\ndescription: Work with PDF files\n---\n\n# PDF\nUse pdftotext.\n"
REVIEW = "---\nname: review\ndescription: Review a change\ncontext: fork\nagent: reviewer\n---\nReview carefully."
RECAP = "---\nname: recap\ndescription: Recap the talk\ncontext: fork_with_context\nagent: reviewer\n---\nRecap it."


def backend() -> InMemoryBackend:
    return InMemoryBackend(
        {"/skills/pdf/SKILL.md": PDF, "/skills/review/SKILL.md": REVIEW, "/skills/recap/SKILL.md": RECAP}
    )


def use(skill: str, id: str = "s1") -> object:
    return calling(call("skill", json.dumps({"skill": skill}), id))


async def test_the_tool_lists_the_skills_and_the_instruction_gets_the_prompt() -> None:
    model = ScriptedChatModel(["ok"])
    agent = ChatModelAgent("a", "d", "Base.", model=model, middlewares=[SkillMiddleware(backend(), base_dir="/skills")])
    await collect(Runner(agent).query("hi"))
    (first,) = model.calls
    assert first.messages[0].content == "Base.\n" + SYSTEM_PROMPT.format(tool_name="skill")
    (tool,) = first.tools
    assert tool.name == "skill" and tool.parameters["required"] == ["skill"]
    assert tool.description == TOOL_DESCRIPTION_BASE + (
        "\n<available_skills>"
        "\n<skill>\n<name>\npdf\n</name>\n<description>\nWork with PDF files\n</description>\n</skill>"
        "\n<skill>\n<name>\nrecap\n</name>\n<description>\nRecap the talk\n</description>\n</skill>"
        "\n<skill>\n<name>\nreview\n</name>\n<description>\nReview a change\n</description>\n</skill>"
        "\n</available_skills>\n"
    )


async def test_an_inline_skill_returns_its_text() -> None:
    model = ScriptedChatModel([use("pdf"), "done"])
    agent = ChatModelAgent("a", "d", model=model, middlewares=[SkillMiddleware(backend(), base_dir="/skills")])
    seen = await collect(Runner(agent).query("read the pdf"))
    assert (
        seen[1].content == "Launching skill: pdf\nBase directory for this skill: /skills/pdf\n\n# PDF\nUse pdftotext."
    )


async def test_fork_runs_the_agent_without_the_history_and_fork_with_context_with_it() -> None:
    reviewer_model = ScriptedChatModel(["looks good", "recapped"])
    reviewer = ChatModelAgent("reviewer", "reviews", "You review.", model=reviewer_model)
    model = ScriptedChatModel([use("review", "s1"), use("recap", "s2"), "done"])
    mw = SkillMiddleware(backend(), base_dir="/skills", agents={"reviewer": reviewer})
    seen = await collect(Runner(ChatModelAgent("a", "d", model=model, middlewares=[mw])).query("review it"))
    assert seen[1].content == 'Skill "review" completed (sub-agent execution).\n\nResult:\nlooks good'
    assert seen[3].content == 'Skill "recap" completed (sub-agent execution).\n\nResult:\nrecapped'
    forked, with_context = reviewer_model.calls
    assert [m.role for m in forked.messages] == ["system", "user"]
    assert forked.messages[1].content.startswith("Launching skill: review\n")
    roles = [m.role for m in with_context.messages]
    assert roles == ["system", "system", "user", "assistant", "tool", "assistant", "tool"]
    assert with_context.messages[-1].tool_call_id == "s2"
    assert with_context.messages[-1].content.endswith("Recap it.")


async def test_a_fork_without_its_agent_is_a_typed_error() -> None:
    model = ScriptedChatModel([use("review")])
    agent = ChatModelAgent("a", "d", model=model, middlewares=[SkillMiddleware(backend(), base_dir="/skills")])
    error = (await collect(Runner(agent).query("x")))[-1].error
    assert isinstance(error, SkillError) and "requires context:fork but no agent 'reviewer' is configured" in str(error)


async def test_skills_from_a_directory_with_an_agent_factory_and_model(tmp_path: Path) -> None:
    (tmp_path / "sum").mkdir()
    (tmp_path / "sum" / "SKILL.md").write_text(
        "---\nname: sum\ndescription: Sums\ncontext: fork\nmodel: small\n---\nAdd."
    )
    small = ScriptedChatModel(["3"])
    made: list[object] = []

    def factory(model: object) -> ChatModelAgent:
        made.append(model)
        assert model is not None
        return ChatModelAgent("adder", "adds", model=model)  # type: ignore[arg-type]

    mw = SkillMiddleware(tmp_path, agents={"": factory}, models={"small": small})
    model = ScriptedChatModel([use("sum"), "done"])
    seen = await collect(Runner(ChatModelAgent("a", "d", model=model, middlewares=[mw])).query("1+2"))
    assert seen[1].content.endswith("Result:\n3") and made == [small]


MALICIOUS = [
    "---\nname: !!python/object/apply:os.system ['touch {sentinel}']\ndescription: x\n---\nbody",
    "---\nname: evil\ndescription: !!python/object/new:os.system ['touch {sentinel}']\n---\nbody",
    "---\n!!python/name:os.system\n---\nbody",
]


@pytest.mark.parametrize("text", MALICIOUS)
async def test_malicious_yaml_tags_are_refused(tmp_path: Path, text: str) -> None:
    sentinel = tmp_path / "pwned"
    files = {"/skills/evil/SKILL.md": text.format(sentinel=sentinel)}
    with pytest.raises(SkillError, match="not safe YAML") as info:
        await load_skills(InMemoryBackend(files), "/skills")
    assert info.value.path == "/skills/evil/SKILL.md"
    assert not sentinel.exists()
    model = ScriptedChatModel(["never"])
    agent = ChatModelAgent(
        "a", "d", model=model, middlewares=[SkillMiddleware(InMemoryBackend(files), base_dir="/skills")]
    )
    error = (await collect(Runner(agent).query("x")))[-1].error
    assert error is not None and model.calls == [] and not sentinel.exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no front matter", "does not start with frontmatter delimiter"),
        ("---\nname: x\n", "closing delimiter not found"),
        ("---\n- a\n- b\n---\n", "must be a mapping, got list"),
        ("---\nname: x\n---\n", "needs a name and a description"),
        ("---\nname: x\ndescription: [1]\n---\n", "'description' must be a string"),
        ("---\nname: x\ndescription: y\ncontext: thread\n---\n", "context must be one of"),
    ],
)
def test_malformed_skills_are_named_in_the_error(text: str, problem: str) -> None:
    with pytest.raises(SkillError, match=problem) as info:
        parse_skill(text, "/s/x/SKILL.md")
    assert "/s/x/SKILL.md" in str(info.value)


def alias_bomb(levels: int, width: int = 10) -> str:
    """Front matter whose ``description`` expands to ``width ** levels`` strings (a 'billion laughs')."""
    lines = ["name: bomb", 'l0: &l0 "lol"']
    for n in range(1, levels + 1):
        lines.append(f"l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * width) + "]")
    lines.append(f"description: *l{levels}")
    return "---\n" + "\n".join(lines) + "\n---\nbody"


def test_a_yaml_alias_bomb_is_refused_without_expanding_it() -> None:
    # 10**6 strings here (a repr of 7 MB in the old error message); a few more levels exhaust the memory
    with pytest.raises(SkillError, match="aliases are not allowed in front matter") as info:
        parse_skill(alias_bomb(6), "/s/bomb/SKILL.md")
    assert "/s/bomb/SKILL.md" in str(info.value) and len(str(info.value)) < 1000
    with pytest.raises(SkillError, match="aliases are not allowed"):
        parse_skill("---\nname: &n x\ndescription: *n\n---\n", "/s/x/SKILL.md")
    with pytest.raises(SkillError, match="longer than 65536 characters"):
        parse_skill("---\nname: x\ndescription: " + "y" * 70_000 + "\n---\n", "/s/x/SKILL.md")
    # a value of the wrong type is named by its type, never rendered
    with pytest.raises(SkillError, match=r"'description' must be a string, got a list$"):
        parse_skill("---\nname: x\ndescription: [" + "1, " * 5000 + "1]\n---\n", "/s/x/SKILL.md")


def test_a_skills_directory_that_does_not_exist_is_a_typed_error(tmp_path: Path) -> None:
    typo = tmp_path / "skils"
    with pytest.raises(SkillError, match=r"skills directory .*skils.* does not exist") as info:
        SkillMiddleware(typo)
    assert info.value.path == str(typo)
    assert not typo.exists()  # not created, empty, offering no skills
    (tmp_path / "file").write_text("x")
    with pytest.raises(SkillError, match="is not a directory"):
        SkillMiddleware(str(tmp_path / "file"))


def test_a_skill_parses() -> None:
    skill = parse_skill(REVIEW, "/skills/review/SKILL.md")
    assert (skill.name, skill.context, skill.agent, skill.base_directory) == (
        "review",
        "fork",
        "reviewer",
        "/skills/review",
    )
    assert skill.content == "Review carefully."


async def test_an_inline_skill_with_a_model_switches_the_run_s_later_calls() -> None:
    files = {"/s/big/SKILL.md": "---\nname: big\ndescription: Hard maths\nmodel: large\n---\nThink hard."}
    large = ScriptedChatModel(["42, carefully"])
    model = ScriptedChatModel([use("big"), "never"])
    mw = SkillMiddleware(InMemoryBackend(files), base_dir="/s", models={"large": large})
    seen = await collect(Runner(ChatModelAgent("a", "d", model=model, middlewares=[mw])).query("6*7?"))
    assert seen[-1].content == "42, carefully"
    assert len(model.calls) == 1 and len(large.calls) == 1
    assert [t.name for t in large.calls[0].tools] == ["skill"]  # the run's tools, bound to the chosen model
    assert large.calls[0].messages[-1].role == "tool"
    # a new run starts with the agent's own model again
    again = ScriptedChatModel(["fine"])
    await collect(Runner(ChatModelAgent("a", "d", model=again, middlewares=[mw])).query("hi"))
    assert len(again.calls) == 1 and len(large.calls) == 1
    unknown = SkillMiddleware(InMemoryBackend(files), base_dir="/s", models={"small": large})
    error = (
        await collect(
            Runner(ChatModelAgent("a", "d", model=ScriptedChatModel([use("big")]), middlewares=[unknown])).query("x")
        )
    )[-1].error
    assert isinstance(error, SkillError) and "requires model 'large'" in str(error)
