"""A webhook's receiver, as the deliverer (identity.feed.delivery) reaches it: one POST per entry, signed
by the Standard Webhooks scheme, on a kept-alive connection to an address that passed the check."""

import time
from datetime import UTC, datetime
from urllib.parse import urlsplit

import urllib3
from standardwebhooks import Webhook as Signer

from .webhooks import AddressRefused, check_address

# A delivery is a 2xx within this many seconds.
TIMEOUT = 10.0
# A receiver's host name is resolved and its addresses checked again after this many seconds.
RECHECK_SECONDS = 5.0
# What is read of a receiver's answer; a longer one costs its connection.
MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "identity-service-webhooks/1"


def describe(error):
    """A short phrase for a failed request: what a deliveries log shows."""
    if isinstance(error, urllib3.exceptions.TimeoutError):
        return f"no answer within {TIMEOUT:g} s"
    if isinstance(error, urllib3.exceptions.NewConnectionError):
        return "could not connect: " + str(error).rsplit(":", 1)[-1].strip()
    return f"{type(error).__name__}: {error}"[:300]


class Receiver:
    """One webhook's receiver: its URL on a kept-alive connection, and the signer of its secret.

    The connection goes to an address that the check before the delivery approved, not to whatever
    the name resolves to a moment later (DNS rebinding); a name is resolved and checked again every
    RECHECK_SECONDS, and after every failed attempt.
    """

    def __init__(self, url, secret):
        self.url = url
        self.signer = Signer(secret)
        parts = urlsplit(url)
        self.https = parts.scheme.lower() == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.host_header = parts.netloc
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.pool = None
        self.address = None
        self.checked_until = 0.0

    def connection(self):
        """The pool for the URL, to an address checked within RECHECK_SECONDS; raises AddressRefused."""
        if self.pool is None or time.monotonic() >= self.checked_until:
            addresses = check_address(self.url)  # None: private addresses allowed, nothing to pin
            address = addresses[0] if addresses else self.host
            if self.pool is None or address != self.address:
                self.close()
                options = {"maxsize": 1, "retries": False, "timeout": urllib3.Timeout(total=TIMEOUT)}
                if self.https:  # the certificate is checked against the URL's name, not the address
                    self.pool = urllib3.HTTPSConnectionPool(
                        address, self.port, server_hostname=self.host, assert_hostname=self.host, **options
                    )
                else:
                    self.pool = urllib3.HTTPConnectionPool(address, self.port, **options)
                self.address = address
            self.checked_until = time.monotonic() + RECHECK_SECONDS
        return self.pool

    def post(self, message_id, body):
        """POST the entry `body` (JSON text) as message `message_id`: (status, error), status None
        when there was no answer, error None for a delivery (a 2xx)."""
        try:
            pool = self.connection()
        except AddressRefused as refused:
            self.close()
            return None, str(refused)
        at = datetime.fromtimestamp(int(time.time()), UTC)
        headers = {
            "Host": self.host_header,
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "webhook-id": message_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": self.signer.sign(message_id, at, body),
        }
        try:
            response = pool.urlopen(
                "POST", self.target, body=body.encode(), headers=headers, redirect=False, retries=False,
                preload_content=False,
            )
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as error:
            self.checked_until = 0.0
            return None, describe(error)
        self._finish(response)
        if 200 <= response.status < 300:
            return response.status, None
        self.checked_until = 0.0
        if 300 <= response.status < 400:
            return response.status, f"answered {response.status}, a redirect, not followed: register the final URL"
        return response.status, f"answered {response.status}"

    @staticmethod
    def _finish(response):
        # The answer is read (up to a bound) so that the connection can carry the next delivery.
        try:
            response.read(MAX_ANSWER_BYTES)
        except (urllib3.exceptions.HTTPError, OSError):
            response.close()
            return
        if response.length_remaining == 0:
            response.release_conn()
        else:
            response.close()

    def close(self):
        if self.pool is not None:
            self.pool.close()
        self.pool = None
