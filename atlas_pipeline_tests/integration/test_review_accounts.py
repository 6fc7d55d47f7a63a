"""A team that logs in: accounts made with `atlas users`, the review page asking for a login once there is one,
decisions recorded under the login (never a name typed in a form), roles enforced, progress per reviewer, a trusted
proxy header, and `atlas review` refusing to listen beyond this machine without authentication."""

import subprocess
import urllib.parse
import urllib.request

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.accounts import AccountError, add_account, authenticate, load_accounts, password_matches
from atlas_pipeline.review.decisions import load_decisions
from atlas_pipeline_tests.support.by_hand import processed_by_hand
from atlas_pipeline_tests.support.helpers import BIN, NoRedirect, http_request, post_form, serve, session_cookie
from atlas_pipeline_tests.support.juice_trial import KEY


def _post(url: str, form: dict, cookie: str = "") -> tuple[int, str]:
    return post_form(url, form, cookie)


def _login(site: str, name: str, password: str) -> tuple[int, str]:
    """(status, the session cookie) of a login."""
    return session_cookie(site, name, password, f"/documents/{KEY}")


def test_accounts_hash_passwords_and_refuse_what_they_must(tmp_path):
    path = tmp_path / "users.json"
    assert load_accounts(path) == {}
    account = add_account(path, "  Ana   Lima ", "extractor", "correct horse battery")
    assert account.name == "Ana Lima" and "correct horse" not in path.read_text()
    assert (path.stat().st_mode & 0o777) == 0o600
    stored = load_accounts(path)["Ana Lima"].password_hash
    assert password_matches("correct horse battery", stored) and not password_matches("correct horse batterY", stored)
    assert authenticate(load_accounts(path), "Ana Lima", "wrong password!") is None
    assert authenticate(load_accounts(path), "Nobody", "correct horse battery") is None
    for name, role, password, said in [
        ("Ana Lima", "extractor", "another long one", "already has an account"),
        ("Ben", "boss", "long enough pw", "unknown role 'boss'"),
        ("Ben", "admin", "short", "at least 10 characters"),
    ]:
        try:
            add_account(path, name, role, password)
        except AccountError as error:
            assert said in str(error)
        else:
            raise AssertionError(f"{name}/{role} was accepted")
    path.write_text("{not json")
    try:
        load_accounts(path)
    except AccountError as error:
        assert "cannot be read" in str(error)  # a damaged file never means "no accounts" (an open page)
    else:
        raise AssertionError("a damaged accounts file was read as no accounts")


def test_a_team_logs_in_and_decisions_carry_the_login(knowledge_base, settings_for, atlas_for, instance, tmp_path):
    from atlas_pipeline.review_page.app import create_app

    # one extractor a document (ATLAS_REVIEW_EXTRACTORS=1): her extraction, once complete, goes to the adjudicator
    settings, atlas = settings_for(knowledge_base, review_extractors="1"), atlas_for(knowledge_base)
    _, record = processed_by_hand(knowledge_base, settings, atlas, instance)
    shown = {"sha256": record.sha256, "extraction_version": record.extraction_version}
    env = {"PATH": str(BIN), "HOME": str(tmp_path), "ATLAS_REVIEW_USERS": settings.review.users}

    # no account: open on this machine, and `atlas review` will not listen beyond it
    refused = subprocess.run(
        [str(BIN / "atlas"), "review", "--host", "0.0.0.0", "--port", "1"], env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "only with authentication" in refused.stderr
    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        assert http_request(f"{site}/")[0] == 200

    for name, role in (("Ana Lima", "extractor"), ("Dan", "adjudicator")):
        made = subprocess.run(
            [str(BIN / "atlas"), "users", "add", name, "--role", role, "--password-stdin"],
            env=env,
            input="a long passphrase\n",
            capture_output=True,
            text=True,
        )
        assert made.returncode == 0, made.stderr
    listed = subprocess.run([str(BIN / "atlas"), "users"], env=env, capture_output=True, text=True).stdout
    assert "Ana Lima\textractor\tpassword" in listed and "Dan\tadjudicator" in listed

    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        request = urllib.request.Request(f"{site}/documents/{KEY}")
        urllib.request.build_opener(NoRedirect).open(request, timeout=30).close()
        assert NoRedirect.last.status == 303 and NoRedirect.last.headers["location"].startswith("/login?next=")
        assert (
            _post(f"{site}/documents/{KEY}/fields/n_control", {**shown, "action": "correct", "value": "30"})[0] == 401
        )
        assert _login(site, "Ana Lima", "not her password")[0] == 401
        status, ana = _login(site, "Ana Lima", "a long passphrase")
        assert status == 303 and ana.startswith("atlas_session=")

        status, page = http_request(f"{site}/documents/{KEY}", headers={"Cookie": ana})
        assert status == 200 and 'id="logged-in">Ana Lima' in page and 'id="reviewer-name"' not in page
        # the login decides, whatever name the form carries
        form = {**shown, "action": "correct", "value": "30", "reviewer": "Mallory"}
        assert _post(f"{site}/documents/{KEY}/fields/n_control", form, ana)[0] == 200
        assert [d.reviewer for d in load_decisions(atlas.store(), KEY)] == ["Ana Lima"]
        settle = {**shown, "action": "correct", "value": "29", "role": "adjudicator"}
        status, body = _post(f"{site}/documents/{KEY}/fields/n_control", settle, ana)
        assert status == 403 and "takes an adjudicator" in body
        assert _post(f"{site}/reviewer", {"reviewer": "Mallory"}, ana)[0] == 403
        _, dan = _login(site, "Dan", "a long passphrase")
        assert _post(f"{site}/documents/{KEY}/fields/n_control", settle, dan)[0] == 409  # she is not done yet
        assert _post(f"{site}/documents/{KEY}/extraction", {"action": "complete"}, ana)[0] == 200
        assert _post(f"{site}/documents/{KEY}/fields/n_control", settle, dan)[0] == 200
        decisions = load_decisions(atlas.store(), KEY)
        assert [(d.reviewer, d.role) for d in decisions if d.on_a_field] == [
            ("Ana Lima", "reviewer"),
            ("Dan", "adjudicator"),
        ]

        status, team = http_request(f"{site}/team", headers={"Cookie": dan})
        assert status == 200
        rows = {row.split('"')[0]: " ".join(row.split()) for row in team.split('<tr data-reviewer="')[1:]}
        assert "<td>extractor</td> <td data-assigned>0</td> <td data-started>0</td>" in rows["Ana Lima"]
        assert "<td data-settled>1</td> <td>1</td>" in rows["Ana Lima"]  # one decision, her extraction settled
        assert "<td>adjudicator</td> <td data-assigned>0</td> <td data-started>0</td>" in rows["Dan"]
        assert "<td data-settled>0</td> <td>1</td>" in rows["Dan"]  # an adjudicator's decision, no extraction
        _post(f"{site}/logout", {}, ana)
        assert http_request(f"{site}/team", headers={"Cookie": ana})[1].count('id="login-form"') == 1  # logged out
        # a changed password ends the sessions opened with the old one
        changed = subprocess.run(
            [str(BIN / "atlas"), "users", "passwd", "Dan", "--password-stdin"],
            env=env,
            input="another passphrase\n",
            capture_output=True,
            text=True,
        )
        assert changed.returncode == 0, changed.stderr
        assert 'id="login-form"' in http_request(f"{site}/team", headers={"Cookie": dan})[1]

    # serving the network: once the last account is gone the page answers nothing (never open to anyone)
    for name in ("Ana Lima", "Dan"):
        subprocess.run([str(BIN / "atlas"), "users", "remove", name], env=env, capture_output=True, check=True)
    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance, host="0.0.0.0")) as site:
        status, body = http_request(f"{site}/")
        assert status == 503 and "has no accounts" in body
    proxied_env = {**env, "ATLAS_REVIEW_AUTH_HEADER": "X-Forwarded-User"}
    refused = subprocess.run(
        [str(BIN / "atlas"), "review", "--host", "0.0.0.0", "--port", "1"],
        env=proxied_env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "listens on 127.0.0.1 and the proxy forwards to it" in refused.stderr

    proxied = settings.updated(review_auth_header="X-Forwarded-User")
    with serve(create_app(Deployment.from_settings(proxied), instance=lambda: instance)) as site:
        assert (
            _post(f"{site}/documents/{KEY}/fields/age_control", {**shown, "action": "correct", "value": "11"})[0] == 401
        )
        headers = {"X-Forwarded-User": "Dan"}
        form = urllib.parse.urlencode({**shown, "action": "correct", "value": "11.09", "reviewer": "Mallory"}).encode()
        # a name the proxy passes without an account is an extractor: Ana's extraction is compared, not hers to join
        status, body = http_request(f"{site}/documents/{KEY}/fields/age_control", form, headers)
        assert status == 409 and "is compared" in body
        add_account(settings.review.users, "Dan", "adjudicator", None)  # proxy only, no password
        assert http_request(f"{site}/documents/{KEY}/fields/age_control", form, headers)[0] == 200
        assert (load_decisions(atlas.store(), KEY)[-1].reviewer, load_decisions(atlas.store(), KEY)[-1].role) == (
            "Dan",
            "adjudicator",
        )
