"""A webhook's receiver, as the deliverer (identity.feed.delivery) reaches it: one POST per entry, signed
by the Standard Webhooks scheme, on a kept-alive connection to an address that passed the check."""

import socket
import ssl
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
    """What the deliveries log says of a request that got no answer: refused, not resolvable, timed out, TLS
    failed or connection lost, with what the error adds.

    Named from the error and the errors it was raised from, not its class alone: urllib3's
    NewConnectionError (a refused connection) and NameResolutionError are subclasses of its
    ConnectTimeoutError, so the class would call a refusal a time-out."""
    chain = _chain(error)

    def found(*kinds):
        return next((link for link in chain if isinstance(link, kinds)), None)

    if cause := found(socket.gaierror):
        return f"not resolvable: the receiver's host name does not resolve ({cause.strerror or cause})"
    if cause := found(ssl.SSLCertVerificationError):
        return f"TLS failed: the receiver's certificate was not accepted ({cause.verify_message or cause.reason})"
    if cause := found(ssl.SSLError, urllib3.exceptions.SSLError):
        return f"TLS failed: {getattr(cause, 'reason', None) or cause}"[:300]
    if found(ConnectionRefusedError):
        return "refused: nothing accepts connections at the receiver's address and port"
    if found(urllib3.exceptions.ReadTimeoutError):
        return f"timed out: no answer within {TIMEOUT:g} s"
    if found(TimeoutError) or type(error) is urllib3.exceptions.ConnectTimeoutError:
        return f"timed out: no connection within {TIMEOUT:g} s"
    if found(urllib3.exceptions.ProtocolError, ConnectionResetError):
        return "connection lost: the receiver closed the connection before it answered"
    if cause := found(OSError):
        return f"could not connect: {cause.strerror or cause}"[:300]
    return f"{type(error).__name__}: {error}"[:300]


def _chain(error):
    """`error` and the errors it was raised from, or while handling, outermost first."""
    chain = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    return chain


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
