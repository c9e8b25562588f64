// SPDX-License-Identifier: MIT
// A minimal contract wallet for the tests (EIP-1271): it accepts a hash signed by its owner's key, and answers
// `answer` then (0x1626ba7e for a wallet that keeps EIP-1271; anything else for one that does not).
// WalletFactory deploys one with CREATE2, so that a wallet's address is known before it exists (EIP-6492).
pragma solidity ^0.8.24;

contract OwnerWallet {
    address public immutable owner;
    bytes4 public immutable answer;

    constructor(address owner_, bytes4 answer_) {
        owner = owner_;
        answer = answer_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        address signer = ecrecover(hash, v, r, s);
        return signer != address(0) && signer == owner ? answer : bytes4(0xffffffff);
    }
}

contract WalletFactory {
    function deploy(address owner, bytes32 salt) external returns (OwnerWallet) {
        return new OwnerWallet{salt: salt}(owner, 0x1626ba7e);
    }

    function addressOf(address owner, bytes32 salt) external view returns (address) {
        bytes memory code = abi.encodePacked(type(OwnerWallet).creationCode, abi.encode(owner, bytes4(0x1626ba7e)));
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, keccak256(code))))));
    }
}
