// Sign-in with an Admin wallet, on the sign-in page when sign-in with Ethereum is on. The browser's wallet
// (window.ethereum, EIP-1193) signs an EIP-4361 message for a nonce of GET /auth/nonce, and the page posts
// the message and its signature in the wallet form, with the page's form token, as the key form posts a key;
// the console then checks them as POST /auth/siwe does. Without JavaScript the section stays hidden.
//
// The message names the wallet's address in its EIP-55 form, which needs Keccak-256: wallets answer
// eth_requestAccounts in lower case, and there is no library here (nor Keccak in the browser's crypto).
"use strict";

(function () {
  var section = document.getElementById("wallet-sign-in");
  if (!section) {
    return;
  }
  var form = document.getElementById("wallet-form");
  var button = document.getElementById("wallet-button");
  var state = document.getElementById("wallet-state");
  var STATEMENT = "Sign in to the Identity service's console.";

  // --- Keccak-256 (the original padding, as Ethereum uses it; not SHA3-256), on 64-bit lanes as BigInts ---
  var MASK = (1n << 64n) - 1n;

  function rotate(lane, by) {
    by = BigInt(by % 64);
    return by === 0n ? lane : ((lane << by) | (lane >> (64n - by))) & MASK;
  }

  // Keccak-f[1600] on lanes[x + 5 * y], as the Keccak team's compact reference (CompactFIPS202) writes it.
  function permute(lanes) {
    var round, x, y, t, c, d, current, next, row, bit = 1;
    for (round = 0; round < 24; round++) {
      c = [];
      for (x = 0; x < 5; x++) {
        c[x] = lanes[x] ^ lanes[x + 5] ^ lanes[x + 10] ^ lanes[x + 15] ^ lanes[x + 20];
      }
      for (x = 0; x < 5; x++) {
        d = c[(x + 4) % 5] ^ rotate(c[(x + 1) % 5], 1);
        for (y = 0; y < 5; y++) {
          lanes[x + 5 * y] ^= d;
        }
      }
      x = 1;
      y = 0;
      current = lanes[1];
      for (t = 0; t < 24; t++) {
        next = [y, (2 * x + 3 * y) % 5];
        x = next[0];
        y = next[1];
        next = lanes[x + 5 * y];
        lanes[x + 5 * y] = rotate(current, ((t + 1) * (t + 2)) / 2);
        current = next;
      }
      for (y = 0; y < 5; y++) {
        row = lanes.slice(5 * y, 5 * y + 5);
        for (x = 0; x < 5; x++) {
          lanes[x + 5 * y] = row[x] ^ (~row[(x + 1) % 5] & MASK & row[(x + 2) % 5]);
        }
      }
      for (t = 0; t < 7; t++) {
        bit = ((bit << 1) ^ ((bit >> 7) * 0x71)) % 256;
        if (bit & 2) {
          lanes[0] ^= 1n << BigInt((1 << t) - 1);
        }
      }
    }
  }

  // The Keccak-256 digest of `bytes` (a Uint8Array), in lower-case hex.
  function keccak256(bytes) {
    var RATE = 136, lanes = [], block, i, j, lane, hex = "";
    var padded = new Uint8Array(Math.floor(bytes.length / RATE) * RATE + RATE);
    padded.set(bytes);
    padded[bytes.length] ^= 0x01;
    padded[padded.length - 1] ^= 0x80;
    for (i = 0; i < 25; i++) {
      lanes.push(0n);
    }
    for (block = 0; block < padded.length; block += RATE) {
      for (i = 0; i < RATE / 8; i++) {
        lane = 0n;
        for (j = 7; j >= 0; j--) {
          lane = (lane << 8n) | BigInt(padded[block + 8 * i + j]);
        }
        lanes[i] ^= lane;
      }
      permute(lanes);
    }
    for (i = 0; i < 4; i++) {
      for (j = 0; j < 8; j++) {
        hex += Number((lanes[i] >> BigInt(8 * j)) & 0xffn).toString(16).padStart(2, "0");
      }
    }
    return hex;
  }

  // An address in its EIP-55 form: a letter is upper case where the hash of the lower-case address has a
  // digit of 8 or more.
  function checksummed(address) {
    var lower = address.toLowerCase().replace(/^0x/, ""), hash, result = "0x", i;
    if (!/^[0-9a-f]{40}$/.test(lower)) {
      throw new Error("The wallet answered " + address + ", which is not an Ethereum address.");
    }
    hash = keccak256(new TextEncoder().encode(lower));
    for (i = 0; i < 40; i++) {
      result += parseInt(hash[i], 16) >= 8 ? lower[i].toUpperCase() : lower[i];
    }
    return result;
  }

  function hexOf(text) {
    return "0x" + Array.from(new TextEncoder().encode(text), function (byte) {
      return byte.toString(16).padStart(2, "0");
    }).join("");
  }

  // --- the sign-in -------------------------------------------------------------------------------------

  function say(text, failed) {
    state.textContent = text;
    state.classList.toggle("failed", Boolean(failed));
  }

  async function nonce() {
    var answer = await fetch(section.dataset.nonceUrl, {headers: {"Accept": "application/json"}});
    var body = await answer.json().catch(function () { return {}; });
    if (!answer.ok) {
      throw new Error("The service gave no nonce: " + (body.detail || "it answered " + answer.status) + ".");
    }
    return body;
  }

  async function signIn() {
    var wallet = window.ethereum;
    if (!wallet || typeof wallet.request !== "function") {
      throw new Error("This browser has no Ethereum wallet (window.ethereum): add one, or sign in with a key.");
    }
    say("Asking the wallet for its account…");
    var accounts = await wallet.request({method: "eth_requestAccounts"});
    if (!accounts || !accounts.length) {
      throw new Error("The wallet shared no account.");
    }
    var address = checksummed(accounts[0]);
    var chainId = parseInt(await wallet.request({method: "eth_chainId"}), 16);
    var issued = await nonce();
    var message = [
      issued.domain + " wants you to sign in with your Ethereum account:",
      address,
      "",
      STATEMENT,
      "",
      "URI: " + issued.uri,
      "Version: 1",
      "Chain ID: " + chainId,
      "Nonce: " + issued.nonce,
      "Issued At: " + new Date().toISOString(),
    ].join("\n");
    say("Asking the wallet to sign the message…");
    var signature = await wallet.request({method: "personal_sign", params: [hexOf(message), accounts[0]]});
    say("Signing in…");
    form.elements.message.value = message;
    form.elements.signature.value = signature;
    form.submit();
  }

  section.hidden = false;
  button.addEventListener("click", function () {
    button.disabled = true;
    signIn().catch(function (error) {
      var refused = error && error.code === 4001;
      say(refused ? "The wallet did not sign: nothing was sent." : (error && error.message) || String(error), true);
      button.disabled = false;
    });
  });
})();
