"""The sinks' secrets come from the environment or from files, never needed on the command
line (docs/configuration.md, *Secrets from files*), and no error shows them."""

from __future__ import annotations

import pytest

from correlake import config
from correlake.delivery.urls import masked, with_password
from correlake.errors import DeliveryError

NAME = config.SINK_PASSWORD_ENV


@pytest.fixture(autouse=True)
def unset(monkeypatch):
    for name in (NAME, f"{NAME}_FILE"):
        monkeypatch.delenv(name, raising=False)


def test_a_secret_from_its_variable_or_from_its_file(tmp_path, monkeypatch):
    assert config.secret(NAME) is None
    monkeypatch.setenv(NAME, "from-the-env")
    assert config.secret(NAME) == "from-the-env"
    monkeypatch.delenv(NAME)
    (tmp_path / "pw").write_text("from the file\n")
    monkeypatch.setenv(f"{NAME}_FILE", str(tmp_path / "pw"))
    assert config.secret(NAME) == "from the file"
    config.validate()


def test_two_sources_or_an_unreadable_file_are_usage_errors_that_show_no_secret(tmp_path, monkeypatch):
    (tmp_path / "pw").write_text("hidden-one")
    monkeypatch.setenv(f"{NAME}_FILE", str(tmp_path / "pw"))
    monkeypatch.setenv(NAME, "hidden-two")
    with pytest.raises(config.ConfigError, match="both set") as both:
        config.validate()
    monkeypatch.delenv(NAME)
    monkeypatch.setenv(f"{NAME}_FILE", str(tmp_path / "none"))
    with pytest.raises(config.ConfigError, match="cannot read .*none") as unreadable:
        config.secret(NAME)
    assert "hidden" not in str(both.value) + str(unreadable.value)


def test_the_password_goes_to_the_urls_user_and_is_never_shown():
    url = with_password("amqp://correlake@rabbitmq:5672/%2F", "p@ss:w/rd %")
    assert url == "amqp://correlake:p%40ss%3Aw%2Frd%20%25@rabbitmq:5672/%2F"
    assert masked(url) == "amqp://correlake:***@rabbitmq:5672/%2F"
    assert with_password("https://h/x", None) == "https://h/x"
    for url in ("amqp://rabbitmq:5672/", "amqp://correlake:in-url@rabbitmq/"):  # no user; a password already
        with pytest.raises(DeliveryError, match="names its user and no password") as refused:
            with_password(url, "p@ss")
        assert "p@ss" not in str(refused.value) and "in-url" not in str(refused.value)
