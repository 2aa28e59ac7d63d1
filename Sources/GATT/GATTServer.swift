import ATT
import AssignedNumbers
import ByteCoding
import L2CAP
import Scheduling

/// A read of a dynamic value, for the server's owner to answer.
public struct GATTReadRequest {
    public let connection: any GATTServerConnection
    public let handle: ATTHandle
    /// The answer is the value from this offset on; an offset past the end is Invalid Offset.
    public let offset: Int
}

/// One write of a dynamic value: all or part of it, at an offset.
public struct GATTWriteRequest {
    public let connection: any GATTServerConnection
    public let handle: ATTHandle
    public let offset: Int
    public let value: [UInt8]
    /// A Write Command: the client gets no answer, errors are dropped.
    public let isCommand: Bool
}

/// The GATT server (Core spec Vol 3 Part G §3–4 over Part F §3.4): the attribute database
/// with the GAP and GATT services, answers to every ATT request, per-connection Client
/// Characteristic Configuration, prepared write queues, and every server-initiated update —
/// notifications and indications of values, and Service Changed — through one queue per
/// connection (see `updateValue(_:forCharacteristic:onlyTo:)`).
///
/// The CCCD table here is the one record of who subscribed to what.
///
/// Loop-confined: call it, and call every `respond` closure it hands out, on the bearer's
/// event loop only.
public final class GATTServer: @unchecked Sendable {
    /// A read of a `.dynamic` value. Call `respond` exactly once, now or later, with the value
    /// from `request.offset` on (the server cuts it to fit the PDU) or an ATT error.
    public var onRead: ((GATTReadRequest, _ respond: @escaping (Result<[UInt8], ATTErrorCode>) -> Void) -> Void)?
    /// Writes of `.dynamic` values: one for a Write Request or Command, all of a client's
    /// queued ones for an Execute Write. Apply all or none; call `respond` exactly once with nil
    /// or the error (attributed to the first request's handle).
    public var onWrite: (([GATTWriteRequest], _ respond: @escaping (ATTErrorCode?) -> Void) -> Void)?
    /// A client's Client Characteristic Configuration of the characteristic whose value has
    /// this handle changed from `old` to `new` (also to `[]` when it disconnects, or when the
    /// service is removed).
    public var onSubscriptionChange: ((_ connection: any GATTServerConnection, _ valueHandle: ATTHandle,
                                       _ old: GATTClientConfiguration, _ new: GATTClientConfiguration) -> Void)?
    /// The database changed over `range` (a service added or removed), after Service Changed
    /// went to the connected clients that asked for it: the owner keeps it for bonded clients
    /// that are away (Vol 3 Part G §7.1).
    public var onDatabaseChanged: ((_ range: ClosedRange<ATTHandle>) -> Void)?
    /// This many updates for which `updateValue` returned false have now been handed to every
    /// connection they were waiting for (or dropped with their connection, their
    /// characteristic or its subscription). Called once per pass over the queues, not per
    /// update; never for updates `updateValue` returned true for. Counted per `owner` (the
    /// one `updateValue` was given: each user of a shared server has its own budget), one call
    /// per owner with a non-zero count.
    public var onUpdatesHandedOver: ((_ count: Int, _ owner: Int) -> Void)?

    /// Prepared writes one client may queue before Prepare Queue Full.
    public var preparedWriteLimit = 64
    /// Indications handed to one connection and not confirmed yet, before that connection's
    /// next update waits for a confirmation. The bearer sends one at a time anyway (§3.3.2) and
    /// the next follows its confirmation at once, so 1 costs no throughput and keeps what is
    /// not on the air in the server's queue, where unsubscribing or removing a service drops it.
    /// (Unchecked exclusivity: loop-confined; `updateValue` read it with a dynamic check.)
    @exclusivity(unchecked) public var indicationWindow = 1

    public private(set) var gapService: GATTServiceHandles!
    public private(set) var gattService: GATTServiceHandles!

    /// The GAP Device Name characteristic's value.
    public var deviceName: String {
        didSet { database.setContent(.stored(Array(deviceName.utf8.prefix(248))), at: gapService.characteristics[0].value) }
    }
    /// The GAP Appearance characteristic's value.
    public var appearance: UInt16 {
        didSet { database.setContent(.stored([UInt8(truncatingIfNeeded: appearance), UInt8(appearance >> 8)]),
                                     at: gapService.characteristics[1].value) }
    }

    var database = GATTDatabase()
    private var cachedHash: [UInt8]?
    // Loop-confined and on the update path: no dynamic exclusivity checks.
    @exclusivity(unchecked) var connections = IntegerKeyMap<ObjectIdentifier, ConnectionState>()  // exclusivity checks: 0.06 % of pair
    /// The open connections in the order they opened: updates to all subscribers go out in it.
    @exclusivity(unchecked) var connectionList: [ConnectionState] = []  // exclusivity checks: 0.28 % of notify
    /// The update queues' bookkeeping (`GATTServer+Updates.swift`).
    @exclusivity(unchecked) var tickets = UpdateTickets()  // exclusivity checks: 0.8 % of notify

    public init(deviceName: String = "", appearance: UInt16 = 0) {
        self.deviceName = deviceName
        self.appearance = appearance
        // Vol 3 Part C §12: Device Name and Appearance, readable without security.
        gapService = try! database.add(GATTService(uuid: .genericAccessService, characteristics: [
            GATTCharacteristic(uuid: .deviceName, properties: .read, permissions: .readable,
                               value: .stored(Array(deviceName.utf8.prefix(248)))),
            GATTCharacteristic(uuid: .appearance, properties: .read, permissions: .readable,
                               value: .stored([UInt8(truncatingIfNeeded: appearance), UInt8(appearance >> 8)])),
        ]), builtIn: true)
        // Vol 3 Part G §7: Service Changed is indicated, never read; the other two serve robust
        // caching. Their values are filled in by the server.
        gattService = try! database.add(GATTService(uuid: .genericAttributeService, characteristics: [
            GATTCharacteristic(uuid: .serviceChanged, properties: .indicate, permissions: [], value: .stored([0, 0, 0, 0])),
            GATTCharacteristic(uuid: .clientSupportedFeatures, properties: [.read, .write], permissions: [.readable, .writeable],
                               value: .dynamic),
            GATTCharacteristic(uuid: .databaseHash, properties: .read, permissions: .readable, value: .dynamic),
        ]), builtIn: true)
        database.setContent(.constant([0, 0, 0, 0]), at: gattService.characteristics[0].value)
        database.setContent(.clientSupportedFeatures, at: gattService.characteristics[1].value)
        database.setContent(.databaseHash, at: gattService.characteristics[2].value)
    }

    // MARK: - The database

    /// Adds a service in the first run of free handles that holds it; connected clients that
    /// asked for Service Changed indications get one for its range.
    @discardableResult
    public func addService(_ service: GATTService) throws(GATTDatabaseError) -> GATTServiceHandles {
        let handles = try database.add(service)
        databaseChanged(handles.range)
        return handles
    }

    /// Removes a service (its handles become free); clients are told as for `addService`.
    public func removeService(_ id: GATTServiceID) throws(GATTDatabaseError) {
        let range = try database.remove(id)
        // Subscriptions to characteristics that are gone end, and updates still queued for them
        // are dropped; the handles may be reused.
        for state in connectionList {
            let gone = state.clientConfigurations.filter { range.contains($0.key) }.sorted { $0.key < $1.key }
            for (valueHandle, configuration) in gone {
                state.clientConfigurations[valueHandle] = nil
                onSubscriptionChange?(state.connection, valueHandle, configuration, [])
            }
            state.preparedWrites.removeAll { range.contains($0.handle) }
            dropUpdates(of: state) { range.contains($0) }
        }
        databaseChanged(range)
        reportHandedOver()
    }

    /// Removes every service but GAP and GATT.
    public func removeAllServices() {
        let ids = database.services.values.filter { !$0.isBuiltIn }.map(\.handles.id)
        // Includers first, so no removal is refused.
        var remaining = Set(ids)
        while !remaining.isEmpty {
            let removable = remaining.filter { id in
                !remaining.contains { database.services[$0]?.includedServices.contains(id) == true }
            }
            for id in removable.sorted(by: { $0.rawValue < $1.rawValue }) { try? removeService(id) }
            remaining.subtract(removable)
        }
    }

    /// The handles of a service in the database.
    public func handles(of id: GATTServiceID) -> GATTServiceHandles? { database.services[id]?.handles }

    /// Replaces a stored value (of a characteristic or descriptor).
    public func setValue(_ value: [UInt8], for handle: ATTHandle) throws(GATTDatabaseError) {
        guard case .stored = database[handle]?.content else { throw .notStored(handle) }
        guard value.count <= ATTMTU.maximumAttributeValueLength else { throw .valueTooLong }
        database.setContent(.stored(value), at: handle)
    }

    /// A stored value, or nil for other kinds of attribute.
    public func storedValue(for handle: ATTHandle) -> [UInt8]? {
        if case .stored(let value) = database[handle]?.content { return value }
        return nil
    }

    /// The Database Hash characteristic's value, little-endian as read over the air.
    public var databaseHash: [UInt8] {
        if let cachedHash { return cachedHash }
        let hash = database.hash
        cachedHash = hash
        return hash
    }

    private func databaseChanged(_ range: ClosedRange<ATTHandle>) {
        cachedHash = nil
        for state in connectionList {
            state.isChangeAware = false
            state.awareOnNextRequest = false
        }
        // Vol 3 Part G §7.1: the affected range, to every client that enabled indications,
        // in order with the updates already queued for it.
        var writer = ByteWriter(capacity: 4)
        writer.u16(range.lowerBound.rawValue)
        writer.u16(range.upperBound.rawValue)
        let serviceChanged = gattService.characteristics[0].value
        for state in connectionList where state.clientConfigurations[serviceChanged]?.contains(.indication) == true {
            offerOwnUpdate(writer.bytes, serviceChanged, to: state)
        }
        onDatabaseChanged?(range)
    }

    /// The Service Changed characteristic's value handle.
    public var serviceChangedHandle: ATTHandle { gattService.characteristics[0].value }

    /// Indicates Service Changed over `range` to one client, if it enabled indications of it:
    /// for a bonded client back after the database changed while it was away.
    public func indicateServiceChanged(_ range: ClosedRange<ATTHandle>, to connection: any GATTServerConnection) {
        let state = state(for: connection)
        guard state.clientConfigurations[serviceChangedHandle]?.contains(.indication) == true else { return }
        var writer = ByteWriter(capacity: 4)
        writer.u16(range.lowerBound.rawValue)
        writer.u16(range.upperBound.rawValue)
        offerOwnUpdate(writer.bytes, serviceChangedHandle, to: state)
    }

    // MARK: - Connections

    final class ConnectionState {
        let connection: any GATTServerConnection
        var isOpen = true
        /// What the client asked for, by characteristic value handle (the CCCD's own handle is
        /// the attribute's); only non-empty configurations are kept.
        @exclusivity(unchecked) var clientConfigurations = IntegerKeyMap<ATTHandle, GATTClientConfiguration>()  // exclusivity checks: 0.28 % of notify
        var clientSupportedFeatures: UInt8 = 0
        var preparedWrites: [PreparedWrite] = []
        /// Updates waiting for this connection, in order; the first one was refused.
        @exclusivity(unchecked) var updates = UpdateQueue()  // exclusivity checks: 0.6 % of notify
        /// Indications handed to the connection and not confirmed (or failed) yet.
        var indicationsInFlight = 0
        /// Set while `pump` sends from `updates`; `pumpAgain` when a pump was asked for meanwhile.
        @exclusivity(unchecked) var isPumping = false  // exclusivity checks: 0.3 % of notify
        @exclusivity(unchecked) var pumpAgain = false  // exclusivity checks: 0.3 % of notify
        // Robust caching (Vol 3 Part G §2.5.2.1), for clients that set the Robust Caching bit.
        var isChangeAware = true
        /// Database Out Of Sync was sent, or the Database Hash read, since the last change: the
        /// next request makes the client change-aware.
        var awareOnNextRequest = false
        var usesRobustCaching: Bool { clientSupportedFeatures & 0x01 != 0 }
        init(_ connection: any GATTServerConnection) { self.connection = connection }
    }

    struct PreparedWrite {
        let handle: ATTHandle
        let offset: Int
        let value: [UInt8]
    }

    private func state(for connection: any GATTServerConnection) -> ConnectionState {
        let id = ObjectIdentifier(connection)
        if let state = connections[id] { return state }
        let state = ConnectionState(connection)
        connections[id] = state
        connectionList.append(state)
        return state
    }

    /// Starts tracking a connection (it also happens on its first request).
    public func connectionOpened(_ connection: any GATTServerConnection) { _ = state(for: connection) }

    /// Forgets a connection: its subscriptions end (each reported as `[]`), its prepared writes
    /// and queued updates are dropped (updates that waited only for it count as handed over),
    /// and late answers to its requests are ignored.
    public func connectionClosed(_ connection: any GATTServerConnection) {
        guard let state = connections.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        connectionList.removeAll { $0 === state }
        state.isOpen = false
        state.preparedWrites = []
        dropUpdates(of: state) { _ in true }
        let ended = state.clientConfigurations.sorted { $0.key < $1.key }
        state.clientConfigurations = [:]
        for (valueHandle, configuration) in ended {
            onSubscriptionChange?(connection, valueHandle, configuration, [])
        }
        reportHandedOver()
    }

    /// Gives a bonded client back the subscriptions it had (Vol 3 Part G §3.3.3.3: a CCCD's
    /// value persists across connections for bonded devices), as if it had written them:
    /// each change is reported through `onSubscriptionChange`. Handles that are no longer a
    /// characteristic's with such a descriptor, and bits it does not allow, are skipped.
    public func restoreClientConfigurations(_ configurations: [ATTHandle: GATTClientConfiguration],
                                            for connection: any GATTServerConnection) {
        let state = state(for: connection)
        for (valueHandle, configuration) in configurations.sorted(by: { $0.key < $1.key }) where !configuration.isEmpty {
            guard let allowed = allowedConfiguration(ofCharacteristic: valueHandle), allowed.isSuperset(of: configuration) else {
                continue
            }
            let old = state.clientConfigurations[valueHandle] ?? []
            guard old != configuration else { continue }
            state.clientConfigurations[valueHandle] = configuration
            onSubscriptionChange?(connection, valueHandle, old, configuration)
        }
    }

    /// The bits the CCCD of the characteristic whose value has `valueHandle` allows; nil when
    /// it has none.
    private func allowedConfiguration(ofCharacteristic valueHandle: ATTHandle) -> GATTClientConfiguration? {
        var handle = valueHandle
        while let next = handle.next, let attribute = database[next] {
            if case .clientConfiguration(let characteristicValue, let allowed) = attribute.content {
                return characteristicValue == valueHandle ? allowed : nil
            }
            // The next declaration (characteristic, service, include) ends the characteristic.
            if Self.declarationTypes.contains(attribute.type) { return nil }
            handle = next
        }
        return nil
    }

    private static let declarationTypes: [BluetoothUUID] = [.primaryService, .secondaryService, .include, .characteristic]

    /// What `connection` asked for the characteristic whose value has `valueHandle`.
    public func clientConfiguration(ofCharacteristic valueHandle: ATTHandle, for connection: any GATTServerConnection)
        -> GATTClientConfiguration
    {
        connections[ObjectIdentifier(connection)]?.clientConfigurations[valueHandle] ?? []
    }

    /// Everything `connection` subscribed to, by characteristic value handle.
    public func clientConfigurations(for connection: any GATTServerConnection) -> [ATTHandle: GATTClientConfiguration] {
        guard let state = connections[ObjectIdentifier(connection)] else { return [:] }
        var all: [ATTHandle: GATTClientConfiguration] = [:]
        for (handle, configuration) in state.clientConfigurations { all[handle] = configuration }
        return all
    }

    /// Connections subscribed (notify or indicate) to the characteristic, in the order they
    /// opened.
    public func subscribers(ofCharacteristic valueHandle: ATTHandle) -> [any GATTServerConnection] {
        connectionList.filter { $0.clientConfigurations[valueHandle] != nil }.map(\.connection)
    }

    // MARK: - Requests

    /// Answers one request with exactly one response, now or (for dynamic values) later.
    /// Exchange MTU belongs to the bearer and is answered Request Not Supported here, as is
    /// anything that is not a request.
    public func handle(_ request: ATTPDU, from connection: any GATTServerConnection,
                       respond: @escaping (ATTPDU) -> Void) {
        let state = state(for: connection)
        let transaction = Transaction(request: request.opcode, state: state, respond: respond)
        let mtu = connection.mtu
        if state.usesRobustCaching && !state.isChangeAware {
            if case .readByTypeRequest(let p) = request, p.attributeType == .databaseHash {
                // Reading the hash is how a client finds out; the next request makes it aware.
                state.awareOnNextRequest = true
            } else if state.awareOnNextRequest {
                state.isChangeAware = true
            } else {
                state.awareOnNextRequest = true
                return transaction.fail(.databaseOutOfSync, .invalid)
            }
        }
        switch request {
        case .findInformationRequest(let p):
            guard let range = transaction.validRange(p.startingHandle, p.endingHandle) else { return }
            let entries = database.attributes(in: range).map { FindInformationEntry(handle: $0.handle, type: $0.type) }
            answer(transaction, ATTPDU.FindInformationResponse.packing(entries, mtu: mtu).map { .findInformationResponse($0) },
                   orNotFound: p.startingHandle)

        case .findByTypeValueRequest(let p):
            guard let range = transaction.validRange(p.startingHandle, p.endingHandle) else { return }
            let found = database.attributes(in: range).filter { attribute in
                guard attribute.type == p.attributeType, attribute.permissions.allowsRead else { return false }
                switch attribute.content {
                case .constant(let value), .stored(let value): return value == p.attributeValue
                default: return false
                }
            }.map { ATTPDU.FindByTypeValueResponse.HandlesInformation(foundAttributeHandle: $0.handle,
                                                                       groupEndHandle: $0.groupEnd ?? $0.handle) }
            answer(transaction, ATTPDU.FindByTypeValueResponse.packing(found, mtu: mtu).map { .findByTypeValueResponse($0) },
                   orNotFound: p.startingHandle)

        case .readByGroupTypeRequest(let p):
            guard let range = transaction.validRange(p.startingHandle, p.endingHandle) else { return }
            guard p.attributeGroupType == .primaryService || p.attributeGroupType == .secondaryService else {
                return transaction.fail(.unsupportedGroupType, p.startingHandle)
            }
            let groups = database.attributes(in: range).compactMap { attribute -> ATTPDU.ReadByGroupTypeResponse.AttributeData? in
                guard attribute.type == p.attributeGroupType, case .constant(let value) = attribute.content else { return nil }
                return .init(handle: attribute.handle, endGroupHandle: attribute.groupEnd ?? attribute.handle, value: value)
            }
            answer(transaction, ATTPDU.ReadByGroupTypeResponse.packing(groups, mtu: mtu).map { .readByGroupTypeResponse($0) },
                   orNotFound: p.startingHandle)

        case .readByTypeRequest(let p):
            guard let range = transaction.validRange(p.startingHandle, p.endingHandle) else { return }
            let candidates = database.attributes(in: range).filter { $0.type == p.attributeType }
            guard !candidates.isEmpty else { return transaction.fail(.attributeNotFound, p.startingHandle) }
            readByType(Array(candidates), transaction, mtu: mtu)

        case .readRequest(let p):
            guard let attribute = transaction.attribute(p.attributeHandle, in: database) else { return }
            readValue(attribute, offset: 0, isBlob: false, state) { result in
                transaction.finish(result.map { .readResponse(.init(attributeValue: Array($0.prefix(mtu - 1)))) },
                                   handle: p.attributeHandle)
            }

        case .readBlobRequest(let p):
            guard let attribute = transaction.attribute(p.attributeHandle, in: database) else { return }
            readValue(attribute, offset: Int(p.valueOffset), isBlob: true, state) { result in
                transaction.finish(result.map { .readBlobResponse(.init(partAttributeValue: Array($0.prefix(mtu - 1)))) },
                                   handle: p.attributeHandle)
            }

        case .readMultipleRequest(let p):
            readMultiple(p.setOfHandles, transaction) { .readMultipleResponse(.init(values: $0, mtu: mtu)) }

        case .readMultipleVariableRequest(let p):
            readMultiple(p.setOfHandles, transaction) { .readMultipleVariableResponse(.init(values: $0, mtu: mtu)) }

        case .writeRequest(let p):
            guard let attribute = transaction.attribute(p.attributeHandle, in: database) else { return }
            writeValue(attribute, p.attributeValue, isCommand: false, state) { error in
                transaction.finish(error.map { .failure($0) } ?? .success(.writeResponse(.init())), handle: p.attributeHandle)
            }

        case .prepareWriteRequest(let p):
            guard let attribute = transaction.attribute(p.attributeHandle, in: database) else { return }
            if let error = accessError(attribute, write: true, state) { return transaction.fail(error, p.attributeHandle) }
            guard state.preparedWrites.count < preparedWriteLimit else {
                return transaction.fail(.prepareQueueFull, p.attributeHandle)
            }
            state.preparedWrites.append(PreparedWrite(handle: p.attributeHandle, offset: Int(p.valueOffset),
                                                      value: p.partAttributeValue))
            transaction.succeed(.prepareWriteResponse(.init(echoing: p)))

        case .executeWriteRequest(let p):
            let queued = state.preparedWrites
            state.preparedWrites = []
            if p.flags == .cancel || queued.isEmpty { return transaction.succeed(.executeWriteResponse(.init())) }
            executeWrites(queued, state) { failure in
                if let failure { transaction.fail(failure.error, failure.handle) } else {
                    transaction.succeed(.executeWriteResponse(.init()))
                }
            }

        default:
            transaction.fail(.requestNotSupported, .invalid)
        }
    }

    /// Carries out a command: Write Command writes (errors are dropped); Signed Write
    /// Command is ignored until signing exists; anything else is ignored.
    public func handleCommand(_ pdu: ATTPDU, from connection: any GATTServerConnection) {
        // A change-unaware client's commands are ignored (Vol 3 Part G §2.5.2.1).
        let state = state(for: connection)
        guard !state.usesRobustCaching || state.isChangeAware else { return }
        guard case .writeCommand(let p) = pdu, let attribute = database[p.attributeHandle] else { return }
        writeValue(attribute, p.attributeValue, isCommand: true, state) { _ in }
    }

    private typealias FindInformationEntry = ATTPDU.FindInformationResponse.Entry

    private func answer(_ transaction: Transaction, _ response: ATTPDU?, orNotFound handle: ATTHandle) {
        if let response { transaction.succeed(response) } else { transaction.fail(.attributeNotFound, handle) }
    }

    // MARK: - Reading

    /// Read By Type: values of the candidates in order, read one after another (dynamic ones
    /// may answer later) until one differs in length from the first, fails, or no longer fits.
    /// A failure of the first is the answer (Vol 3 Part F §3.4.4.1).
    private func readByType(_ candidates: [Attribute], _ transaction: Transaction, mtu: Int) {
        var collected: [ATTPDU.ReadByTypeResponse.AttributeData] = []
        let cap = ATTMTU.maximumReadByTypeValueLength(mtu: mtu)
        var used = 0
        func finish() {
            guard let response = ATTPDU.ReadByTypeResponse.packing(collected, mtu: mtu) else {
                return transaction.fail(.unlikelyError, candidates[0].handle) // only with an MTU below the minimum
            }
            transaction.succeed(.readByTypeResponse(response))
        }
        func step(_ index: Int) {
            guard index < candidates.count else { return finish() }
            let attribute = candidates[index]
            readValue(attribute, offset: 0, isBlob: false, transaction.state) { result in
                switch result {
                case .failure(let error):
                    if collected.isEmpty { transaction.fail(error, attribute.handle) } else { finish() }
                case .success(let value):
                    if let first = collected.first, first.value.count != value.count { return finish() }
                    let size = 2 + min(value.count, cap)
                    guard used + size <= mtu - 2 else { return finish() }
                    used += size
                    collected.append(.init(handle: attribute.handle, value: value))
                    step(index + 1)
                }
            }
        }
        step(0)
    }

    /// Read Multiple (Variable): every handle must exist and be readable; values in order.
    private func readMultiple(_ handles: [ATTHandle], _ transaction: Transaction,
                              response: @escaping ([[UInt8]]) -> ATTPDU) {
        var attributes: [Attribute] = []
        for handle in handles {
            guard let attribute = transaction.attribute(handle, in: database) else { return }
            attributes.append(attribute)
        }
        var values: [[UInt8]] = []
        func step(_ index: Int) {
            guard index < attributes.count else { return transaction.succeed(response(values)) }
            readValue(attributes[index], offset: 0, isBlob: false, transaction.state) { result in
                switch result {
                case .failure(let error): transaction.fail(error, attributes[index].handle)
                case .success(let value):
                    values.append(value)
                    step(index + 1)
                }
            }
        }
        step(0)
    }

    /// The value from `offset` on, after the permission checks. For a Read Blob of a value the
    /// server holds that fits in one Read Response: Attribute Not Long (§3.4.4.5; GATT's Read
    /// Long Characteristic Values expects it, Vol 3 Part G §4.8.3). Dynamic values are the
    /// owner's to cut.
    private func readValue(_ attribute: Attribute, offset: Int, isBlob: Bool, _ state: ConnectionState,
                           completion: @escaping (Result<[UInt8], ATTErrorCode>) -> Void) {
        if let error = accessError(attribute, write: false, state) { return completion(.failure(error)) }
        let whole: [UInt8]
        switch attribute.content {
        case .constant(let value), .stored(let value): whole = value
        case .clientConfiguration(let valueHandle, _):
            let bits = state.clientConfigurations[valueHandle]?.rawValue ?? 0
            whole = [UInt8(truncatingIfNeeded: bits), UInt8(bits >> 8)]
        case .clientSupportedFeatures: whole = [state.clientSupportedFeatures]
        case .databaseHash: whole = databaseHash
        case .dynamic:
            guard let onRead else { return completion(.failure(.unlikelyError)) }
            let once = Once()
            onRead(GATTReadRequest(connection: state.connection, handle: attribute.handle, offset: offset)) { result in
                guard once.first(), state.isOpen else { return }
                completion(result)
            }
            return
        }
        guard offset <= whole.count else { return completion(.failure(.invalidOffset)) }
        // Values the server holds change only at the owner's hand, so they count as fixed.
        if isBlob, whole.count <= ATTMTU.maximumReadValueLength(mtu: state.connection.mtu) {
            return completion(.failure(.attributeNotLong))
        }
        completion(.success(Array(whole[offset...])))
    }

    // MARK: - Writing

    /// A Write Request or Command to one attribute.
    private func writeValue(_ attribute: Attribute, _ value: [UInt8], isCommand: Bool, _ state: ConnectionState,
                            completion: @escaping (ATTErrorCode?) -> Void) {
        if let error = accessError(attribute, write: true, state) { return completion(error) }
        guard value.count <= ATTMTU.maximumAttributeValueLength else { return completion(.invalidAttributeValueLength) }
        if case .dynamic = attribute.content {
            return deliver([GATTWriteRequest(connection: state.connection, handle: attribute.handle, offset: 0,
                                             value: value, isCommand: isCommand)], state, completion)
        }
        switch validated(attribute, value, state) {
        case .failure(let error): completion(error)
        case .success(let apply):
            apply()
            completion(nil)
        }
    }

    /// Hands dynamic writes to the owner; its one answer goes to `completion`.
    private func deliver(_ requests: [GATTWriteRequest], _ state: ConnectionState,
                         _ completion: @escaping (ATTErrorCode?) -> Void) {
        guard let onWrite else { return completion(.unlikelyError) }
        let once = Once()
        onWrite(requests) { error in
            guard once.first(), state.isOpen else { return }
            completion(error)
        }
    }

    /// Checks a whole new value for an attribute the server holds, and returns how to store it.
    private func validated(_ attribute: Attribute, _ value: [UInt8], _ state: ConnectionState)
        -> Result<() -> Void, ATTErrorCode>
    {
        switch attribute.content {
        case .constant, .databaseHash, .dynamic:
            return .failure(.writeNotPermitted)
        case .stored:
            guard value.count <= ATTMTU.maximumAttributeValueLength else { return .failure(.invalidAttributeValueLength) }
            return .success { [self] in database.setContent(.stored(value), at: attribute.handle) }
        case .clientConfiguration(let valueHandle, let allowed):
            guard value.count == 2 else { return .failure(.invalidAttributeValueLength) }
            let configuration = GATTClientConfiguration(rawValue: UInt16(value[0]) | UInt16(value[1]) << 8)
            // Bits the characteristic's properties do not offer, and reserved bits, cannot be set.
            guard allowed.isSuperset(of: configuration) else { return .failure(.cccdImproperlyConfigured) }
            return .success { [self] in
                let old = state.clientConfigurations[valueHandle] ?? []
                guard old != configuration else { return }
                state.clientConfigurations[valueHandle] = configuration.isEmpty ? nil : configuration
                onSubscriptionChange?(state.connection, valueHandle, old, configuration)
                // What waits may now go as the other kind, or be dropped.
                if !state.updates.isEmpty {
                    pump(state)
                    reportHandedOver()
                }
            }
        case .clientSupportedFeatures:
            // §7.2: at least the first octet; a client may not clear a bit it has set.
            guard let first = value.first else { return .failure(.invalidAttributeValueLength) }
            guard first & state.clientSupportedFeatures == state.clientSupportedFeatures else {
                return .failure(.valueNotAllowed)
            }
            return .success { state.clientSupportedFeatures = first }
        }
    }

    /// Execute Write: assemble every queued value, check them all, then write all (the dynamic
    /// ones as one batch to the owner) or none.
    private func executeWrites(_ queued: [PreparedWrite], _ state: ConnectionState,
                               completion: @escaping ((error: ATTErrorCode, handle: ATTHandle)?) -> Void) {
        var dynamic: [GATTWriteRequest] = []
        var assembled: [(attribute: Attribute, value: [UInt8])] = []
        for write in queued {
            guard let attribute = database[write.handle] else { return completion((.invalidHandle, write.handle)) }
            guard write.offset + write.value.count <= ATTMTU.maximumAttributeValueLength else {
                return completion((.invalidAttributeValueLength, write.handle))
            }
            if case .dynamic = attribute.content {
                dynamic.append(GATTWriteRequest(connection: state.connection, handle: write.handle, offset: write.offset,
                                                value: write.value, isCommand: false))
                continue
            }
            let index = assembled.firstIndex { $0.attribute.handle == write.handle }
            var value = index.map { assembled[$0].value } ?? currentValue(attribute, state)
            guard write.offset <= value.count else { return completion((.invalidOffset, write.handle)) }
            value = Array(value.prefix(write.offset)) + write.value
            if let index { assembled[index].value = value } else { assembled.append((attribute, value)) }
        }
        var applies: [() -> Void] = []
        for (attribute, value) in assembled {
            switch validated(attribute, value, state) {
            case .failure(let error): return completion((error, attribute.handle))
            case .success(let apply): applies.append(apply)
            }
        }
        guard !dynamic.isEmpty else {
            applies.forEach { $0() }
            return completion(nil)
        }
        deliver(dynamic, state) { error in
            if let error { return completion((error, dynamic[0].handle)) }
            applies.forEach { $0() }
            completion(nil)
        }
    }

    /// The value a prepared write at an offset builds on.
    private func currentValue(_ attribute: Attribute, _ state: ConnectionState) -> [UInt8] {
        switch attribute.content {
        case .constant(let value), .stored(let value): return value
        case .clientConfiguration(let valueHandle, _):
            let bits = state.clientConfigurations[valueHandle]?.rawValue ?? 0
            return [UInt8(truncatingIfNeeded: bits), UInt8(bits >> 8)]
        case .clientSupportedFeatures: return [state.clientSupportedFeatures]
        case .databaseHash: return databaseHash
        case .dynamic: return []
        }
    }

    // MARK: - Permissions

    /// Read or Write Not Permitted, or the security error the link's level calls for (Vol 3
    /// Part C §10.3): with a key to encrypt with but no encryption yet, Insufficient
    /// Encryption; otherwise (no key, or a key not strong enough) Insufficient Authentication.
    private func accessError(_ attribute: Attribute, write: Bool, _ state: ConnectionState) -> ATTErrorCode? {
        let permissions = attribute.permissions
        guard write ? permissions.allowsWrite : permissions.allowsRead else {
            return write ? .writeNotPermitted : .readNotPermitted
        }
        let level = state.connection.securityLevel
        guard level < permissions.requiredLevel(forWrite: write) else { return nil }
        return !level.isEncrypted && state.connection.hasEncryptionKey ? .insufficientEncryption : .insufficientAuthentication
    }
}

/// One request being answered: makes sure exactly one response goes out, and none after the
/// connection closed.
private final class Transaction {
    let request: ATTOpcode
    let state: GATTServer.ConnectionState
    private let respond: (ATTPDU) -> Void
    private let once = Once()

    init(request: ATTOpcode, state: GATTServer.ConnectionState, respond: @escaping (ATTPDU) -> Void) {
        self.request = request
        self.state = state
        self.respond = respond
    }

    func succeed(_ response: ATTPDU) {
        guard once.first(), state.isOpen else { return }
        respond(response)
    }

    func fail(_ error: ATTErrorCode, _ handle: ATTHandle) {
        succeed(.errorResponse(.init(requestOpcode: request, attributeHandle: handle, errorCode: error)))
    }

    func finish(_ result: Result<ATTPDU, ATTErrorCode>, handle: ATTHandle) {
        switch result {
        case .success(let response): succeed(response)
        case .failure(let error): fail(error, handle)
        }
    }

    /// The range, or nil after answering Invalid Handle (handle 0, or start after end).
    func validRange(_ start: ATTHandle, _ end: ATTHandle) -> ClosedRange<ATTHandle>? {
        guard start.isValid, start <= end else {
            fail(.invalidHandle, start)
            return nil
        }
        return start...end
    }

    /// The attribute, or nil after answering Invalid Handle.
    func attribute(_ handle: ATTHandle, in database: GATTDatabase) -> Attribute? {
        guard let attribute = database[handle] else {
            fail(.invalidHandle, handle)
            return nil
        }
        return attribute
    }
}

/// True the first time only: callbacks the owner may call more than once count once.
private final class Once {
    private var used = false
    func first() -> Bool {
        defer { used = true }
        return !used
    }
}
