// Sign-in with an Admin wallet, on the sign-in page when sign-in with Ethereum is on. The browser's wallet
// (window.ethereum, EIP-1193) names its account and chain; the console writes the EIP-4361 message for them,
// with the address in its EIP-55 form and a fresh nonce (the section's data-message-url); the wallet signs it
// as it is (personal_sign), and the page posts the message and its signature in the wallet form, with the
// page's form token, as the key form posts a key. The console then checks them as POST /auth/siwe does.
// Without JavaScript the section stays hidden.
"use strict";

(function () {
  var section = document.getElementById("wallet-sign-in");
  if (!section) {
    return;
  }
  var form = document.getElementById("wallet-form");
  var button = document.getElementById("wallet-button");
  var state = document.getElementById("wallet-state");

  function hexOf(text) {
    return "0x" + Array.from(new TextEncoder().encode(text), function (byte) {
      return byte.toString(16).padStart(2, "0");
    }).join("");
  }

  function say(text, failed) {
    state.textContent = text;
    state.classList.toggle("failed", Boolean(failed));
  }

  // What a problem (RFC 9457) answer says: its detail, then what it says of each parameter.
  function problemOf(body, status) {
    var said = [body.detail || "it answered " + status];
    Object.values(body.errors || {}).forEach(function (messages) {
      said = said.concat(messages);
    });
    return said.join(" ");
  }

  // The message for `account` on the chain `chainId` (decimal), as the console writes it.
  async function messageFor(account, chainId) {
    var url = new URL(section.dataset.messageUrl, window.location.href);
    url.searchParams.set("address", account);
    url.searchParams.set("chain_id", chainId);
    var answer = await fetch(url, {headers: {"Accept": "application/json"}});
    var body = await answer.json().catch(function () { return {}; });
    if (!answer.ok) {
      throw new Error("The service wrote no message to sign: " + problemOf(body, answer.status));
    }
    return body.message;
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
    // eth_chainId is hex; BigInt keeps any chain id exact (EIP-155's are up to 256 bits).
    var chainId = BigInt(await wallet.request({method: "eth_chainId"})).toString();
    var message = await messageFor(accounts[0], chainId);
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
