"""TokenReview, SubjectAccessReview and LocalSubjectAccessReview (api/reviews.py), asked with the
official client over a socket of a server in RBAC mode, as webhook authenticators and
authorizers (kube-rbac-proxy) ask them."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import httpx
import pytest
from kubernetes import client

from controlplane.tokens import find_admin, read_token_file
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("reviews"), extra=("--authorization-mode", "RBAC"))) as s:
        yield s


def token_review(api: client.ApiClient, token: str, audiences: list[str] | None = None) -> client.V1TokenReviewStatus:
    review = client.AuthenticationV1Api(api).create_token_review(client.V1TokenReview(
        spec=client.V1TokenReviewSpec(token=token, audiences=audiences)))
    status: client.V1TokenReviewStatus = review.status
    return status


def test_a_token_review_authenticates_as_requests_are(served: Serve, api: client.ApiClient) -> None:
    admin = read_token_file(served.tokens)[0]
    status = token_review(api, admin.token)
    assert status.authenticated and status.user.username == admin.user
    assert {"system:masters", "system:authenticated"} <= set(status.user.groups)
    assert status.audiences == ["https://kubernetes.default.svc.cluster.local"]
    assert not token_review(api, "not-a-token").authenticated
    assert not token_review(api, admin.token, ["vault"]).authenticated  # not one of the server's audiences

    v1 = client.CoreV1Api(api)
    v1.create_namespaced_service_account("default", client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="bot")))
    issued = v1.create_namespaced_service_account_token("bot", "default", client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=["vault"], expiration_seconds=600)))
    status = token_review(api, issued.status.token, ["vault", "other"])
    assert status.authenticated and status.user.username == "system:serviceaccount:default:bot"
    assert status.audiences == ["vault"]
    account = v1.read_namespaced_service_account("bot", "default")
    assert status.user.uid == account.metadata.uid  # upstream's UserInfo: the account's uid, the token's id
    assert status.user.groups == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    jti = json.loads(base64.urlsafe_b64decode(issued.status.token.split(".")[1] + "=="))["jti"]
    assert status.user.extra == {"authentication.kubernetes.io/credential-id": [f"JTI={jti}"]}
    assert not token_review(api, issued.status.token).authenticated  # the server's audiences: not its

    with pytest.raises(client.ApiException) as e:
        token_review(api, "")
    assert e.value.status == 400


@pytest.mark.parametrize("body", [{}, {"spec": {}}, {"spec": None}, {"spec": {"token": None}},
                                  {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                   "spec": {"token": "", "audiences": ["vault"]}}])
def test_a_token_review_without_a_token_is_kube_apiserver_s_400(served: Serve, body: dict[str, object]) -> None:
    # `{}` was a 422 (spec: Required value) from the OpenAPI schema's required fields; TokenReview has
    # no validation: its storage (pkg/registry/authentication/tokenreview/storage.go) refuses the empty
    # token itself, a 400 without details
    with httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as http:
        r = http.post("/apis/authentication.k8s.io/v1/tokenreviews", json=body)
    assert r.status_code == 400, r.text
    assert r.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "token is required for TokenReview in authentication", "reason": "BadRequest", "code": 400}


def test_subject_access_reviews_ask_the_rbac_rules_about_another_user(api: client.ApiClient) -> None:
    v1, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    authz = client.AuthorizationV1Api(api)
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="dev")))
    rbac.create_namespaced_role("dev", client.V1Role(
        metadata=client.V1ObjectMeta(name="pod-reader"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get"])]))
    rbac.create_namespaced_role_binding("dev", client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="alice-reads"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="pod-reader"),
        subjects=[client.RbacV1Subject(kind="User", name="alice", api_group="rbac.authorization.k8s.io")]))

    def allowed(verb: str, namespace: str = "dev", user: str = "alice", groups: list[str] | None = None) -> bool:
        review = authz.create_subject_access_review(client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=user, groups=groups, resource_attributes=client.V1ResourceAttributes(
                namespace=namespace, verb=verb, resource="pods"))))
        return bool(review.status.allowed)

    # the binding takes effect once its write reaches the authorizer's cache, a few milliseconds
    # after it is acknowledged (api/rbac.py), as upstream's informer-fed authorizer: more on a
    # loaded machine (denied under -n 3)
    deadline = time.monotonic() + 10
    while not allowed("get"):
        assert time.monotonic() < deadline, "the binding never took effect"
        time.sleep(0.05)
    assert not allowed("list") and not allowed("get", namespace="prod")
    assert allowed("delete", user="root", groups=["system:masters"])

    local = authz.create_namespaced_local_subject_access_review("dev", client.V1LocalSubjectAccessReview(
        metadata=client.V1ObjectMeta(namespace="dev"), spec=client.V1SubjectAccessReviewSpec(
            user="alice", resource_attributes=client.V1ResourceAttributes(namespace="dev", verb="get",
                                                                          resource="pods"))))
    assert local.status.allowed and local.metadata.namespace == "dev"

    with pytest.raises(client.ApiException) as e:  # neither a user nor a group
        authz.create_subject_access_review(client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(verb="get", resource="pods"))))
    assert e.value.status == 422 and "at least one of user or group must be specified" in e.value.body
    with pytest.raises(client.ApiException) as e:  # another namespace than the URL's
        authz.create_namespaced_local_subject_access_review("dev", client.V1LocalSubjectAccessReview(
            metadata=client.V1ObjectMeta(namespace="dev"), spec=client.V1SubjectAccessReviewSpec(
                user="alice", resource_attributes=client.V1ResourceAttributes(namespace="prod", verb="get",
                                                                              resource="pods"))))
    assert e.value.status == 422 and "must match metadata.namespace" in e.value.body


_NEITHER = {"reason": "FieldValueInvalid", "field": "spec.resourceAttributes",
            "message": 'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be '
                       "specified"}
_NOBODY = {"reason": "FieldValueInvalid", "field": "spec.user",
           "message": 'Invalid value: "": at least one of user or group must be specified'}
_BOTH = {"reason": "FieldValueInvalid", "field": "spec.nonResourceAttributes",
         "message": 'Invalid value: authorization.NonResourceAttributes{Path:"/api", Verb:"get"}: cannot be '
                    "specified in combination with resourceAttributes"}
_ACCESS_REVIEWS = {"SubjectAccessReview": "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                   "SelfSubjectAccessReview": "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                   "LocalSubjectAccessReview": "/apis/authorization.k8s.io/v1/namespaces/default/"
                                               "localsubjectaccessreviews"}


def _post(served: Serve, path: str, body: dict[str, object]) -> httpx.Response:
    with httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as http:
        return http.post(path, json=body)


@pytest.mark.parametrize("body", [{}, {"spec": {}}, {"spec": None}])
@pytest.mark.parametrize("kind", sorted(_ACCESS_REVIEWS))
def test_an_access_review_of_nothing_gets_every_error_of_upstream_s_validation(
        served: Serve, kind: str, body: dict[str, object]) -> None:
    # a missing or null spec is Go's empty struct, not a missing required field; the errors
    # come together, in ValidateSubjectAccessReviewSpec's order (a self review has no user to name)
    r = _post(served, _ACCESS_REVIEWS[kind], {"apiVersion": "authorization.k8s.io/v1", "kind": kind, **body})
    assert r.status_code == 422, r.text
    causes = [_NEITHER] if kind == "SelfSubjectAccessReview" else [_NEITHER, _NOBODY]
    message = f"{causes[0]['field']}: {causes[0]['message']}" if len(causes) == 1 else \
        "[" + ", ".join(f"{c['field']}: {c['message']}" for c in causes) + "]"
    assert r.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'{kind}.authorization.k8s.io "" is invalid: {message}', "reason": "Invalid",
        "details": {"group": "authorization.k8s.io", "kind": kind, "causes": causes}, "code": 422}


@pytest.mark.parametrize("kind", sorted(_ACCESS_REVIEWS))
def test_an_access_review_of_both_kinds_of_attributes_is_invalid(served: Serve, kind: str) -> None:
    spec = {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"},
            "nonResourceAttributes": {"path": "/api", "verb": "get"}}
    r = _post(served, _ACCESS_REVIEWS[kind], {"apiVersion": "authorization.k8s.io/v1", "kind": kind,
                                              "spec": spec})
    assert r.status_code == 422, r.text
    expected = [_BOTH] if kind == "SelfSubjectAccessReview" else [_BOTH, _NOBODY]
    if kind == "LocalSubjectAccessReview":  # and a local review has no business with paths at all
        expected.append({**_BOTH, "message": _BOTH["message"].replace(
            "cannot be specified in combination with resourceAttributes", "disallowed on this kind of request")})
    assert r.json()["details"]["causes"] == expected


def test_an_access_review_with_metadata_is_invalid(served: Serve) -> None:
    r = _post(served, _ACCESS_REVIEWS["SubjectAccessReview"], {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {"name": "x"},
        "spec": {"user": "bob", "nonResourceAttributes": {"path": "/api", "verb": "get"}}})
    assert r.status_code == 422, r.text
    [cause] = r.json()["details"]["causes"]
    assert cause["field"] == "metadata" and cause["message"].startswith('Invalid value: v1.ObjectMeta{Name:"x", ')
    assert cause["message"].endswith("}: must be empty")
    # a cluster-scoped review's namespace is cleared (the create handler's), a local one's must be the URL's
    r = _post(served, _ACCESS_REVIEWS["SubjectAccessReview"], {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {"namespace": "x"},
        "spec": {"user": "bob", "nonResourceAttributes": {"path": "/api", "verb": "get"}}})
    assert r.status_code == 201 and "namespace" not in r.json()["metadata"], r.text
    r = _post(served, _ACCESS_REVIEWS["LocalSubjectAccessReview"], {
        "apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview", "metadata": {"namespace": "x"},
        "spec": {"user": "bob", "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}})
    assert r.status_code == 400, r.text
    assert r.json()["message"] == "the namespace of the provided object does not match the namespace sent on " \
                                  "the request"


@pytest.mark.parametrize("body", [{}, {"spec": {}}, {"spec": None}, {"spec": {"namespace": ""}}])
def test_a_rules_review_without_a_namespace_is_kube_apiserver_s_400(served: Serve, body: dict[str, object]) -> None:
    r = _post(served, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", body)
    assert r.status_code == 400, r.text
    assert r.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": "no namespace on request", "reason": "BadRequest", "code": 400}


def test_a_rules_review_and_a_self_review_answer_with_new_objects(served: Serve) -> None:
    # upstream's storage returns objects of its own: the request's metadata and spec are not echoed
    r = _post(served, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", {
        "metadata": {"labels": {"a": "b"}}, "spec": {"namespace": "default"}})
    assert r.status_code == 201, r.text
    got = r.json()
    assert (got["kind"], got["apiVersion"]) == ("SelfSubjectRulesReview", "authorization.k8s.io/v1")
    assert got["metadata"] == {} and got["spec"] == {}  # (a zero creationTimestamp omitted, as since 1.34)
    assert got["status"]["incomplete"] is False and {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} \
        in got["status"]["resourceRules"]
    r = _post(served, "/apis/authentication.k8s.io/v1/selfsubjectreviews", {"metadata": {"labels": {"a": "b"}}})
    assert r.status_code == 201, r.text
    got = r.json()
    assert list(got["metadata"]) == ["creationTimestamp"] and got["metadata"]["creationTimestamp"].endswith("Z")
    admin = find_admin(read_token_file(served.tokens))
    assert admin is not None and got["status"]["userInfo"]["username"] == admin.user


def test_the_reviews_metadata_has_no_zero_creation_timestamp(served: Serve) -> None:
    """A review's zero ``creationTimestamp`` is left out, as Go writes ObjectMeta's since 1.34
    (``omitzero``, kubernetes#130989): ``"metadata": {}``, not ``{"creationTimestamp": null}``;
    a local review keeps its namespace, a TokenReview the metadata it was sent."""
    admin = find_admin(read_token_file(served.tokens))
    assert admin is not None
    attributes = {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}
    asked = [
        ("/apis/authorization.k8s.io/v1/subjectaccessreviews",
         {"kind": "SubjectAccessReview", "spec": {"user": "alice", **attributes}}, {}),
        ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
         {"kind": "SelfSubjectAccessReview", "spec": attributes}, {}),
        ("/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews",
         {"kind": "LocalSubjectAccessReview", "spec": {"user": "alice", **attributes}}, {"namespace": "default"}),
        ("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
         {"kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}}, {}),
        ("/apis/authentication.k8s.io/v1/tokenreviews",
         {"kind": "TokenReview", "metadata": {"name": "mine"}, "spec": {"token": admin.token}}, {"name": "mine"}),
    ]
    for path, body, metadata in asked:
        group = path.split("/")[2]
        with httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as http:
            r = http.post(path, json={"apiVersion": f"{group}/v1", **body})
        assert r.status_code == 201, r.text
        assert b"creationTimestamp" not in r.content, r.text
        assert r.json()["metadata"] == metadata, (path, r.text)
