import HCI
import LECrypto
import Scheduling

// Link-layer privacy (Vol 6 Part B §6, Vol 4 Part E §7.8.38–7.8.45, §7.8.77): the resolving list
// gives local resolvable private addresses for Own_Address_Type 0x02/0x03 and turns the peers'
// resolvable private addresses back into their identities.

extension VirtualController {
    /// One entry of the resolving list, with the addresses the link layer made or heard for it.
    struct ResolvingListEntry {
        /// The peer's identity address: public or random static.
        var peer: LEAddress
        /// As HCI carries them: least significant octet first.
        var peerIRK: [UInt8]
        var localIRK: [UInt8]
        /// The IRKs most significant octet first, as `ah` takes them; nil when all zero (no key).
        let peerKey: [UInt8]?
        let localKey: [UInt8]?
        var privacyMode = LESetPrivacyMode.PrivacyMode.network
        /// The local RPA used towards this peer until the next RPA timeout.
        var localRPA: BluetoothAddress?
        /// The peer's RPA: last heard from it, or made for it as the target of directed advertising.
        var peerRPA: BluetoothAddress?

        init(peer: LEAddress, peerIRK: [UInt8], localIRK: [UInt8]) {
            self.peer = peer
            self.peerIRK = peerIRK
            self.localIRK = localIRK
            peerKey = peerIRK.contains { $0 != 0 } ? Array(peerIRK.reversed()) : nil
            localKey = localIRK.contains { $0 != 0 } ? Array(localIRK.reversed()) : nil
        }
    }

    /// A device address heard on the air, and whose it is once the resolving list has seen it.
    struct HeardAddress {
        /// As received: public or random.
        var onAir: LEAddress
        /// The identity (public or random static) when the address resolved, else `onAir`.
        var identity: LEAddress
        /// The peer's resolving list entry: the one that resolved the address, or the one
        /// listing it as an identity address.
        var entry: Int?
        var resolved = false

        init(_ address: LEAddress) {
            onAir = address
            identity = address
        }

        /// What the host is told: a resolved identity is Public/Random Identity (0x02/0x03).
        var reported: LEAddress {
            resolved ? LEAddress(identity.isRandom ? .randomIdentity : .publicIdentity, identity.address) : onAir
        }

        /// The peer's RPA, when the address resolved.
        var rpa: BluetoothAddress? { resolved ? onAir.address : nil }
    }

    // MARK: Resolving received addresses

    /// Resolves a peer's device address with the resolving list (when address resolution is
    /// enabled). Nil when the PDU is to be ignored: a listed peer with an IRK heard under its
    /// identity address in network privacy mode (Vol 6 Part B §6.4, Vol 4 Part E §7.8.77).
    func heard(_ address: LEAddress) -> HeardAddress? {
        var heard = HeardAddress(address)
        guard addressResolutionEnabled, !resolvingList.isEmpty else { return heard }
        if address.isRandom && address.address.randomSubtype == .resolvablePrivate {
            let value = address.address.value
            guard let index = resolvingList.firstIndex(where: { entry in
                entry.peerKey.map { LECrypto.resolves(address: value, irk: $0) } ?? false
            }) else { return heard }
            resolvingList[index].peerRPA = address.address
            heard.identity = resolvingList[index].peer
            heard.entry = index
            heard.resolved = true
            return heard
        }
        guard let index = resolvingListIndex(of: address) else { return heard }
        let entry = resolvingList[index]
        if entry.peerKey != nil && entry.privacyMode == .network { return nil }
        heard.entry = index
        return heard
    }

    /// The entry for an identity address (type 0x00–0x03: identity types count as their base type).
    func resolvingListIndex(of identity: LEAddress) -> Int? {
        resolvingList.firstIndex { $0.peer.address == identity.address && $0.peer.isRandom == identity.isRandom }
    }

    /// The filter accept list holds identities: a resolved peer passes under its identity.
    func isInFilterAcceptList(_ heard: HeardAddress) -> Bool { isInFilterAcceptList(heard.identity) }

    /// Whether a directed PDU's TargetA is this device: `own`, or (resolving) an RPA made from
    /// one of the list's local IRKs.
    func isAddressedToUs(_ target: LEAddress, own: LEAddress?) -> Bool {
        if let own, target.address == own.address { return true }
        guard addressResolutionEnabled, target.isRandom, target.address.randomSubtype == .resolvablePrivate else { return false }
        let value = target.address.value
        return resolvingList.contains { entry in entry.localKey.map { LECrypto.resolves(address: value, irk: $0) } ?? false }
    }

    /// Whether a peer heard matches the peer a command names, by identity: Peer_Address_Type
    /// 0x02/0x03 name identities, and with resolution 0x00/0x01 match a resolved identity too.
    func matches(_ heard: HeardAddress, peerType: LEAddressType, peerAddress: BluetoothAddress) -> Bool {
        heard.identity.address == peerAddress && heard.identity.isRandom == peerType.isRandomOwnAddress
    }

    // MARK: Local addresses

    /// The address to use towards the peer of resolving list entry `entry` for an
    /// Own_Address_Type: with 0x02/0x03, resolution enabled and a local IRK for that peer, its
    /// local RPA (Vol 4 Part E §7.8.5); otherwise the public or random address.
    func ownAddress(_ type: LEAddressType, toward entry: Int?) -> LEAddress? {
        privateOwnAddress(type, toward: entry) ?? ownAddress(type)
    }

    /// The local RPA for Own_Address_Type 0x02/0x03 towards `entry`, if there is one.
    func privateOwnAddress(_ type: LEAddressType, toward entry: Int?) -> LEAddress? {
        guard type == .publicIdentity || type == .randomIdentity, addressResolutionEnabled, let entry,
              let rpa = localRPA(entry) else { return nil }
        return LEAddress(.randomDevice, rpa)
    }

    /// The current local RPA of an entry with a local IRK, made on first use.
    func localRPA(_ entry: Int) -> BluetoothAddress? {
        guard resolvingList.indices.contains(entry), let key = resolvingList[entry].localKey else { return nil }
        if let rpa = resolvingList[entry].localRPA { return rpa }
        let rpa = newResolvablePrivateAddress(key)
        resolvingList[entry].localRPA = rpa
        return rpa
    }

    /// Whether `address` is a local RPA this controller made from the resolving list: what
    /// LE Enhanced Connection Complete reports as Local_Resolvable_Private_Address.
    func generatedLocalRPA(_ address: LEAddress?) -> BluetoothAddress? {
        guard let address, address.isRandom, resolvingList.contains(where: { $0.localRPA == address.address }) else { return nil }
        return address.address
    }

    /// TargetA of directed advertising to `peer` (Vol 6 Part B §6.2): an RPA made from the
    /// peer's IRK when resolution is enabled and the list has one, else the identity itself.
    func directedTarget(_ peer: LEAddress) -> LEAddress {
        let onAir = LEAddress(peer.isRandom ? .randomDevice : .publicDevice, peer.address)
        guard addressResolutionEnabled, let index = resolvingListIndex(of: peer),
              let key = resolvingList[index].peerKey else { return onAir }
        if let rpa = resolvingList[index].peerRPA, LECrypto.resolves(address: rpa.value, irk: key) {
            return LEAddress(.randomDevice, rpa)
        }
        let rpa = newResolvablePrivateAddress(key)
        resolvingList[index].peerRPA = rpa
        return LEAddress(.randomDevice, rpa)
    }

    /// A fresh RPA for an IRK (MSO first). prand is 0b01 then 22 bits neither all 0 nor all 1
    /// (Vol 6 Part B §1.3.2.2), from the radio's seeded generator so runs repeat.
    func newResolvablePrivateAddress(_ irk: [UInt8]) -> BluetoothAddress {
        while true {
            let random = UInt32(truncatingIfNeeded: radio.randomUInt64()) & 0x3F_FFFF
            guard random != 0 && random != 0x3F_FFFF else { continue }
            return BluetoothAddress(value: LECrypto.makeResolvablePrivateAddress(irk: irk, prand: 0x40_0000 | random))
        }
    }

    // MARK: RPA timeout

    /// (Re)starts the RPA timer when resolution is enabled, stops it otherwise.
    func restartRPATimer() {
        rpaTimer?.cancel()
        rpaTimer = nil
        guard addressResolutionEnabled else { return }
        rpaTimer = loop.schedule(after: .seconds(Int64(rpaTimeoutSeconds))) { [weakSelf = WeakHandle(self)] in weakSelf.object?.rpaTimeoutExpired() }
    }

    /// New local RPAs for every peer that had one, and for directed targets, used from the
    /// next advertising event on (Vol 6 Part B §1.3.2.2; Vol 4 Part E §7.8.45).
    private func rpaTimeoutExpired() {
        for index in resolvingList.indices {
            if let key = resolvingList[index].localKey, resolvingList[index].localRPA != nil {
                resolvingList[index].localRPA = newResolvablePrivateAddress(key)
            }
        }
        if advertising.enabled { refreshLegacyAdvertisingAddresses() }
        for (handle, set) in extended.sets where set.enabled {
            extended.sets[handle]?.ownAddress = ownAddress(of: set)
            if set.isDirected { extended.sets[handle]?.targetAddress = nextDirectedTarget(set.peer) }
        }
        restartRPATimer()
    }

    /// A directed target made afresh (rotation), rather than the one in use.
    private func nextDirectedTarget(_ peer: LEAddress) -> LEAddress {
        if let index = resolvingListIndex(of: peer) { resolvingList[index].peerRPA = nil }
        return directedTarget(peer)
    }

    /// The legacy advertiser's AdvA and TargetA from its parameters and the resolving list.
    func refreshLegacyAdvertisingAddresses() {
        let p = advertising.parameters
        let peer = LEAddress(p.peerAddressType, p.peerAddress)
        advertising.ownAddress = ownAddress(p.ownAddressType, toward: resolvingListIndex(of: peer))
        let directed = p.advertisingType == .advDirectIndHighDuty || p.advertisingType == .advDirectIndLowDuty
        advertising.targetAddress = directed ? (advertising.enabled ? nextDirectedTarget(peer) : directedTarget(peer)) : nil
    }

    // MARK: Commands

    /// The privacy commands not about list membership: resolvable address reads, privacy mode.
    /// Returns false for other commands.
    func handlePrivacyCommand(_ packet: HCICommandPacket) -> Bool {
        switch packet.opcode {
        case LEReadPeerResolvableAddress.opcode:
            guard let c = decode(LEReadPeerResolvableAddress.self, packet) else { return true }
            let address = resolvingListIndex(of: LEAddress(c.peerIdentityAddressType, c.peerIdentityAddress))
                .flatMap { resolvingList[$0].peerRPA }
            commandComplete(packet.opcode, LEReadPeerResolvableAddress.ReturnParameters(
                status: address == nil ? .unknownConnectionIdentifier : .success, peerResolvableAddress: address ?? .zero))
        case LEReadLocalResolvableAddress.opcode:
            guard let c = decode(LEReadLocalResolvableAddress.self, packet) else { return true }
            let address = resolvingListIndex(of: LEAddress(c.peerIdentityAddressType, c.peerIdentityAddress))
                .flatMap { resolvingList[$0].localRPA }
            commandComplete(packet.opcode, LEReadLocalResolvableAddress.ReturnParameters(
                status: address == nil ? .unknownConnectionIdentifier : .success, localResolvableAddress: address ?? .zero))
        case LESetPrivacyMode.opcode:
            guard let c = decode(LESetPrivacyMode.self, packet) else { return true }
            guard !addressResolutionInUse else { commandComplete(packet.opcode, status: .commandDisallowed); return true }
            guard let index = resolvingListIndex(of: LEAddress(c.peerIdentityAddressType, c.peerIdentityAddress)) else {
                commandComplete(packet.opcode, status: .unknownConnectionIdentifier)
                return true
            }
            resolvingList[index].privacyMode = c.privacyMode
            commandComplete(packet.opcode, status: .success)
        default:
            return false
        }
        return true
    }
}
