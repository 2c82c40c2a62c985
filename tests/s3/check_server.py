"""Checks that the S3 server at AWS_ENDPOINT_URL does what blz's commit rests on (ranged
GETs, If-None-Match: * and If-Match on PUT) and creates the test bucket.

BLZ_S3_CHECK_IF_MATCH=report: a server that refuses If-Match with the object's own ETag
(radosgw 16.2 compares it without its quotes) is reported, not failed: only a dataset's
first commit works there, which is enough for speed figures of creates and reads."""

import os

import boto3
import botocore.exceptions

s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
bucket = os.environ["BLZ_S3_TEST_BUCKET"]
try:
    s3.create_bucket(Bucket=bucket)
except botocore.exceptions.ClientError as e:
    # A server whose storage outlives it (s3s-fs with S3S_ROOT) may have it already.
    if e.response["Error"]["Code"] not in ("BucketAlreadyExists", "BucketAlreadyOwnedByYou"):
        raise


def refused(**kw):
    try:
        s3.put_object(Bucket=bucket, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"] in (409, 412)
    return False


key = "check/state"
s3.delete_object(Bucket=bucket, Key=key)
first = s3.put_object(Bucket=bucket, Key=key, Body=b"0123456789", IfNoneMatch="*")
assert refused(Key=key, Body=b"x", IfNoneMatch="*"), "If-None-Match: * was not honoured"
got = s3.get_object(Bucket=bucket, Key=key, Range="bytes=1-2")["Body"].read()
assert got == b"12", got
if refused(Key=key, Body=b"abc", IfMatch=first["ETag"]):
    s3.delete_object(Bucket=bucket, Key=key)
    assert os.environ.get("BLZ_S3_CHECK_IF_MATCH") == "report", "If-Match with the ETag was refused"
    print(
        "S3 server: ranged GET and If-None-Match on PUT honoured; If-Match with the object's"
        " ETag REFUSED (a dataset's first commit works, later ones get Conflict)"
    )
else:
    assert refused(Key=key, Body=b"y", IfMatch=first["ETag"]), "If-Match was not honoured"
    s3.delete_object(Bucket=bucket, Key=key)
    print("S3 server: ranged GET, If-Match and If-None-Match on PUT honoured")
