"""The chart's values reference is what values.yaml says today."""

import values_reference


def test_the_values_page_is_values_yaml():
    assert values_reference.PAGE.read_text() == values_reference.page(), (
        "docs/reference/values.md is not what charts/hub-follower/values.yaml says; run "
        "`python tests/docs/values_reference.py --write` and commit it"
    )


def test_every_value_is_on_the_page():
    import yaml

    def keys(node, prefix=""):
        for key, value in node.items():
            yield prefix + key
            if isinstance(value, dict):
                yield from keys(value, prefix + key + ".")

    values = yaml.safe_load(values_reference.VALUES.read_text())
    listed = {".".join(path) for path, _, _ in values_reference.entries()}
    assert set(keys(values)) == listed
