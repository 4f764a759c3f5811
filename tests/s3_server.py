"""A real S3 server on 127.0.0.1 for the tests: moto's server in a process of its own, with
authentication on (an IAM user whose keys the tests use; wrong keys are refused), the way
s3fs's own test suite runs one.

The ``s3`` fixture (tests/conftest.py) starts one per test session and sets ``AWS_*`` in the
environment, as a user on a cluster would (so commands run by the tests find the endpoint and
the keys with no storage options); ``s3_bucket`` gives each test a new, empty bucket.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from processes import free_ports

__all__ = ["S3Server", "start_server"]


@dataclass
class S3Server:
    """A running moto S3 server and the credentials of its one user."""

    endpoint: str
    key: str
    secret: str
    process: subprocess.Popen[bytes]

    @property
    def env(self) -> dict[str, str]:
        """The environment a process needs to use the server (endpoint and credentials)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            region_name="us-east-1",
        )

    def new_bucket(self) -> str:
        """Create a bucket with a fresh name; return its name."""
        name = f"test-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key in ``bucket`` under ``prefix``, sorted."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def start_server() -> S3Server:
    """Start moto's S3 server on a free loopback port, with authentication enforced after the
    three requests that create its user (create_user, put_user_policy, create_access_key)."""
    (port,) = free_ports(1)
    endpoint = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"moto's S3 server did not start on {endpoint}") from None
            time.sleep(0.1)
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bootstrap",
        aws_secret_access_key="bootstrap",
    )
    iam.create_user(UserName="fairpca-tests")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName="fairpca-tests", PolicyName="all", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="fairpca-tests")["AccessKey"]
    return S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"], process)
