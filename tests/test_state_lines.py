"""A task's own state lines (`state_lines` of its variants file) replace a dimension's generic ones
where those would be false for the task: the planets task (HumanEval/148) has no limit a value sits
on, only the two given planets at the ends."""

import pytest

from capa_hf.content import load_content
from capa_hf.conventions import task_dimensions
from capa_hf.errors import CapaError
from capa_hf.generation.pipeline import World, plan_cells, request_context
from capa_hf.generation.stage1_realize import TemplateRealizer
from capa_hf.simulator.user_data import stated_line


@pytest.fixture(scope="module")
def content():
    return load_content()


def test_the_task_lines_replace_the_generic_ones_and_leave_other_tasks_alone(content):
    dims = content.dimensions
    own = task_dimensions(dims, content.variants["HumanEval/148"])
    for value in ("strict", "inclusive"):
        lines = own["bounds"].value(value).state
        assert lines == content.variants["HumanEval/148"].state_lines["bounds"][value]
        assert not any("limit" in line for line in lines)
        assert own["bounds"].value(value).habit == dims["bounds"].value(value).habit
    assert task_dimensions(dims, content.variants["HumanEval/3"]) is dims
    assert "limit" in stated_line("HumanEval/3", "bounds", "strict")
    assert "limit" not in stated_line("HumanEval/148", "bounds", "strict")


def test_a_value_the_dimension_does_not_have_is_a_one_line_error(content):
    src = content.variants["HumanEval/148"]
    bad = src.model_copy(update={"state_lines": {"bounds": {"loose": ("Anything goes.",)}}})
    with pytest.raises(CapaError, match=r"HumanEval_148.yaml: state_lines.bounds names \['loose'\]"):
        task_dimensions(content.dimensions, bad)


def test_no_planets_request_speaks_of_a_limit(design0):
    w = World.load()
    plans = plan_cells(list(design0), w, 0)
    cells = {c.cell_id: c for c in design0}
    planets = [p for p in plans.values() if p.task_id == "HumanEval/148"]
    assert any("bounds" in dict(p.stated) for p in planets)
    for p in planets:
        ctx = request_context(cells[p.session_id.split("-")[0]], p, w, 0, 0, 0)
        real = TemplateRealizer().realize(ctx)
        # the request's stated line, and the task part of a hidden bounds clarification (after the
        # user's own cross-task habit, which may speak of limits)
        assert "limit" not in real.initial_request.lower(), p.session_id
        for h in real.hidden_items:
            if h.dimension == "bounds":
                assert any(line.lower().rstrip(".") in h.clarification.lower()
                           for line in w.content.variants["HumanEval/148"].state_lines["bounds"][dict(p.values)["bounds"]])
