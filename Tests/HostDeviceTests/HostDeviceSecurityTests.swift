import ATT
import AssignedNumbers
import GATT
import HCI
import HostStack
import Logging
import LogTesting
import SMP
import Scheduling
import StackLogging
import Testing
@testable import HostDevice

/// A service whose characteristic needs an encrypted link to read and to subscribe to.
private func protectedService() -> GATTService {
    GATTService(uuid: BluetoothUUID(uuid16: 0xEE00), characteristics: [
        GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0xEE01), properties: [.read, .notify],
                           permissions: .readEncryptionRequired, value: .dynamic,
                           clientConfigurationPermissions: [.readable, .writeEncryptionRequired]),
    ])
}

/// `shared` serves the protected service; `peerA` connects to it as central.
private struct SecureBench {
    let bench: Bench
    let server = Client("server")
    let visitor = Client("visitor")
    let handles: GATTServiceHandles

    init(logging: StackLogging = .standard) throws {
        bench = try Bench(logging: logging)
        bench.shared.addClient(server, roles: .peripheral)
        server.answer = Array("secret".utf8)
        handles = try bench.shared.addService(protectedService(), for: server)
        bench.peerA.addClient(visitor, roles: .central)
    }

    var valueHandle: ATTHandle { handles.characteristics[0].value }

    /// Connects `peerA` to `shared` (advertising first); returns both ends.
    func connect() throws -> (outgoing: DeviceConnection, incoming: DeviceConnection) {
        let (server, visitor) = (server, visitor)
        let before = (server.connected.count, visitor.connected.count)
        try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: server, completion: $0) }
        bench.peerA.connect(to: try #require(bench.shared.address), for: visitor)
        #expect(bench.run { visitor.connected.count > before.1 && server.connected.count > before.0 })
        return (try #require(visitor.connected.last), try #require(server.connected.last))
    }

    func disconnect(_ connection: DeviceConnection) {
        let visitor = visitor
        let before = visitor.disconnected.count
        bench.peerA.disconnect(connection, for: visitor)
        #expect(bench.run { visitor.disconnected.count > before })
        bench.runFor(.milliseconds(50))
    }

    func read(on connection: DeviceConnection) -> Result<[UInt8], GATTClientError>? {
        var result: Result<[UInt8], GATTClientError>?
        connection.client.readValue(of: valueHandle) { result = $0 }
        bench.loop.run(until: { result != nil }, timeout: .seconds(60))
        return result
    }
}

@Suite("Host device: pairing, bonds and what they keep")
struct HostDeviceSecurityTests {
    @Test func aConnectionAndItsPairingAreLoggedPerLayerWithTheLinkAndNoKey() throws {
        let capture = LogCapture()
        let rig = try SecureBench(logging: capture.logging)
        let first = try rig.connect()
        #expect(try rig.read(on: first.outgoing)?.get() == Array("secret".utf8))
        rig.disconnect(first.outgoing)
        let records = capture.records

        // The connection, on corebluetooth.hci, tagged with the link, from both ends.
        let connected = records.filter { $0.label == "corebluetooth.hci" && $0.message.hasPrefix("connected to") }
        #expect(connected.count == 2, "\(capture.text)")
        let handle = Logger.hex(first.outgoing.handle)
        #expect(connected.contains {
            $0.level == .info && $0.metadata["connection"] == .string(handle) && $0.metadata["role"] == "central"
                && $0.metadata["peer"] == .string("\(first.outgoing.le.peer)")
        }, "\(capture.text)")
        #expect(records.contains { $0.label == "corebluetooth.hci" && $0.message.hasPrefix("disconnected from") && $0.level == .info })

        // The pairing, on corebluetooth.smp, tagged with the link: facts, never a key.
        let paired = records.filter { $0.label == "corebluetooth.smp" && $0.message.hasPrefix("pairing succeeded") }
        #expect(paired.count == 2, "\(capture.text)")
        #expect(paired.allSatisfy { $0.metadata["connection"] != nil && $0.metadata["peer"] != nil && $0.metadata["role"] != nil })
        #expect(paired.allSatisfy { $0.message.contains("bonded") && $0.message.contains("method") })
        let text = capture.text.lowercased()
        var secrets: [[UInt8]] = [rig.bench.shared.bonds.localIRK, rig.bench.peerA.bonds.localIRK]
        for bond in rig.bench.shared.bonds.bonds + rig.bench.peerA.bonds.bonds {
            secrets += [bond.centralLTK?.key, bond.peripheralLTK?.key, bond.peerIRK, bond.peerCSRK, bond.localCSRK].compactMap { $0 }
        }
        #expect(secrets.count >= 4)
        for secret in secrets {
            for order in [secret, secret.reversed()] {
                let pairs = order.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }
                #expect(!text.contains(pairs.joined()) && !text.contains(pairs.joined(separator: " ")), "a key in the logs")
                #expect(!text.contains("\(order)"))
            }
        }
    }

    @Test func aProtectedReadPairsThenAReconnectionIsServedOnlyAfterEncryptionWithTheBondsKey() throws {
        let rig = try SecureBench()
        let first = try rig.connect()
        #expect(try rig.read(on: first.outgoing)?.get() == Array("secret".utf8))
        #expect(first.outgoing.security.isBonded && first.incoming.security.isBonded)
        #expect(rig.bench.shared.bonds.bonds.count == 1 && rig.bench.peerA.bonds.bonds.count == 1)
        rig.disconnect(first.outgoing)

        let second = try rig.connect()
        #expect(second.incoming.security.isBonded)
        // Without the client's hook, the server's answer shows: a bonded peer on a link not yet
        // encrypted is told to encrypt, and nothing protected is served (BLESA).
        let hook = second.outgoing.bearer.onInsufficientSecurity
        second.outgoing.bearer.onInsufficientSecurity = nil
        #expect(rig.read(on: second.outgoing) == .failure(.attributeError(.insufficientEncryption, handle: rig.valueHandle)))
        second.outgoing.bearer.onInsufficientSecurity = hook
        let reads = rig.server.reads.count
        #expect(try rig.read(on: second.outgoing)?.get() == Array("secret".utf8))
        #expect(rig.server.reads.count == reads + 1)
        #expect(second.incoming.security.level == .unauthenticatedEncryption)
    }

    @Test func aBondedClientsSubscriptionsAndAMissedServiceChangedComeBackAfterEncryption() throws {
        let rig = try SecureBench()
        let first = try rig.connect()
        // Service Changed indications on (the GATT service's CCCD needs no security), then the
        // protected subscription (which pairs).
        let serviceChanged = rig.bench.shared.gattServer.serviceChangedHandle
        var results: [Result<Void, GATTClientError>] = []
        first.outgoing.client.writeValue([0x02, 0x00], to: ATTHandle(serviceChanged.rawValue + 1)) { results.append($0) }
        first.outgoing.client.writeValue([0x01, 0x00], to: ATTHandle(rig.valueHandle.rawValue + 1)) { results.append($0) }
        #expect(rig.bench.run { results.count == 2 })
        #expect(results.allSatisfy { if case .success = $0 { true } else { false } })
        let bond = try #require(rig.bench.shared.bonds.bonds.first)
        #expect(bond.cccdValues[rig.valueHandle.rawValue] == 0x0001)
        #expect(bond.cccdValues[serviceChanged.rawValue] == 0x0002)
        rig.disconnect(first.outgoing)
        // The disconnection's unsubscribes are not kept.
        #expect(rig.bench.shared.bonds.bonds.first?.cccdValues[rig.valueHandle.rawValue] == 0x0001)

        // The database changes while the client is away.
        _ = try rig.bench.shared.addService(Bench.service(0xAB00), for: rig.server)
        #expect(rig.bench.shared.bonds.bonds.first?.serviceChangedPending == true)

        let second = try rig.connect()
        let subscriptions = rig.server.subscriptions.count
        var indicated: [[UInt8]] = []
        second.outgoing.bearer.onIndication = { handle, value in if handle == serviceChanged { indicated.append(value) } }
        var done = false
        rig.bench.peerA.secure(second.outgoing, level: .unauthenticatedEncryption) { _ in done = true }
        #expect(rig.bench.run { done })
        #expect(rig.bench.run { !indicated.isEmpty })
        #expect(indicated == [[0x01, 0x00, 0xFF, 0xFF]])
        #expect(rig.bench.shared.bonds.bonds.first?.serviceChangedPending == false)
        #expect(rig.bench.shared.gattServer.clientConfiguration(ofCharacteristic: rig.valueHandle,
                                                                for: second.incoming.serverConnection) == .notification)
        #expect(rig.server.subscriptions.count == subscriptions + 1)
    }

    @Test func aPeripheralsSecurityRequestIsAnsweredWithThePairingOrTheBondsKey() throws {
        let rig = try SecureBench()
        let first = try rig.connect()
        var results: [Bool] = []
        // The peripheral asks; the central, with no bond yet, pairs.
        rig.bench.shared.secure(first.incoming, level: .unauthenticatedEncryption) { results.append((try? $0.get()) != nil) }
        #expect(rig.bench.run { results.count == 1 })
        #expect(results == [true] && first.outgoing.security.isBonded)
        rig.disconnect(first.outgoing)
        // Again on a new link: the central encrypts with the bond's key, no pairing.
        let second = try rig.connect()
        rig.bench.shared.secure(second.incoming, level: .unauthenticatedEncryption) { results.append((try? $0.get()) != nil) }
        #expect(rig.bench.run { results.count == 2 })
        #expect(results == [true, true])
        #expect(second.incoming.security.level == .unauthenticatedEncryption)
        // The central hears its Encryption Change a moment later.
        #expect(rig.bench.run { second.outgoing.le.isEncrypted })
    }

    @Test func aPeerThatLostItsKeysFailsEncryptionWithPeerRemovedPairingInformation() throws {
        let rig = try SecureBench()
        let first = try rig.connect()
        #expect(try rig.read(on: first.outgoing)?.get() == Array("secret".utf8))
        rig.disconnect(first.outgoing)
        // The peripheral forgets the central.
        #expect(rig.bench.shared.removeBond(for: first.incoming.peer))
        let second = try rig.connect()
        #expect(rig.read(on: second.outgoing) == .failure(.securityFailed(.peerRemovedPairingInformation)))
    }

    @Test func afterAFailedPairingThePeerWaitsBeforeTheNextOne() throws {
        let rig = try SecureBench()
        rig.bench.shared.securityConfiguration.requireMITM = true
        let first = try rig.connect()
        var results: [LinkSecurityError?] = []
        let record = { (result: Result<Void, LinkSecurityError>) in
            if case .failure(let error) = result { results.append(error) } else { results.append(nil) }
        }
        rig.bench.peerA.secure(first.outgoing, level: .unauthenticatedEncryption, completion: record)
        #expect(rig.bench.run { results.count == 1 })
        #expect(results.last == .pairingFailed(.remoteFailure(.authenticationRequirements)))
        // At once again: Repeated Attempts.
        rig.bench.peerA.pair(first.outgoing, completion: record)
        #expect(rig.bench.run { results.count == 2 })
        #expect(results.last == .pairingFailed(.remoteFailure(.repeatedAttempts)))
    }
}

@Suite("Host device: privacy")
struct HostDevicePrivacyTests {
    @Test(arguments: [false, true])
    func aBondedPeerAdvertisingFromRotatingPrivateAddressesKeepsItsIdentity(controllerResolves: Bool) throws {
        let rig = try SecureBench()
        try rig.bench.run { rig.bench.shared.enablePrivacy(rotation: .seconds(60), completion: $0) }
        let identity = try #require(rig.bench.shared.address)
        // Before bonding, the central sees only a resolvable private address.
        let scanner = Client("scanner")
        rig.bench.peerA.addClient(scanner, roles: .central)
        try rig.bench.run { rig.bench.shared.startAdvertising(Bench.advertising(), for: rig.server, completion: $0) }
        rig.bench.peerA.startScanning(for: scanner)
        #expect(rig.bench.run { !scanner.reports.isEmpty })
        let seen = try #require(scanner.reports.last?.address)
        #expect(seen.isResolvablePrivate && seen != identity)
        rig.bench.peerA.stopScanning(for: scanner)

        // Pair over a link made to that address: the central learns the identity and the IRK,
        // and tells who keeps identifiers that the peer at `seen` is `identity`.
        var bonded: [[LEAddress]] = []
        rig.bench.peerA.onBond = { linkPeer, identity in bonded.append([linkPeer, identity]) }
        rig.bench.peerA.connect(to: seen, for: rig.visitor)
        #expect(rig.bench.run { rig.visitor.connected.count == 1 })
        let first = try #require(rig.visitor.connected.last)
        #expect(first.le.peerOnAir == seen)
        #expect(try rig.read(on: first)?.get() == Array("secret".utf8))
        #expect(rig.bench.peerA.bonds.bonds.first?.peerIdentity == identity)
        #expect(bonded == [[seen, identity]])
        rig.disconnect(first)

        // As after a restart, the bond goes into the central's controller (or the host resolves).
        if controllerResolves {
            var loaded = false
            rig.bench.peerA.loadResolvingList { loaded = true }
            #expect(rig.bench.run { loaded })
            #expect(rig.bench.peerA.host.resolvingListPeers == [identity] && rig.bench.peerA.host.isResolvingAddresses)
        }

        // Two rotations later the address is new; reports and the connection carry the identity.
        rig.bench.runFor(.seconds(130))
        try rig.bench.run { rig.bench.shared.startAdvertising(Bench.advertising(), for: rig.server, completion: $0) }
        scanner.reports = []
        rig.bench.peerA.startScanning(for: scanner)
        #expect(rig.bench.run { !scanner.reports.isEmpty })
        #expect(scanner.reports.last?.address == identity)
        rig.bench.peerA.stopScanning(for: scanner)
        rig.bench.peerA.connect(to: identity, for: rig.visitor)
        #expect(rig.bench.run { rig.visitor.connected.count == 2 })
        let second = try #require(rig.visitor.connected.last)
        #expect(second.peer == identity)
        #expect(second.le.peerOnAir.isResolvablePrivate && second.le.peerOnAir != seen)
        // Resolved by the controller, the link layer's event named the identity and the RPA.
        #expect((second.le.peerResolvablePrivateAddress != nil) == controllerResolves)
        // The bond's key encrypts the link: no second pairing.
        #expect(try rig.read(on: second)?.get() == Array("secret".utf8))
        #expect(second.security.level == .unauthenticatedEncryption)
    }
}
