import Logging
import Scheduling
import ATT
import AssignedNumbers
import ByteCoding
import StackLogging

/// The GATT client procedures (Core spec Vol 3 Part G §4) over one ATT bearer: discovery,
/// reads (long values continued with Read Blob), writes (long and reliable ones with Prepare /
/// Execute Write), write without response with back-pressure, subscriptions through the
/// Client Characteristic Configuration descriptor, and Service Changed.
///
/// Procedures wait in a bounded queue and run one at a time, each to completion, so a long
/// read or a discovery is never interleaved with another procedure's requests. Each completes
/// exactly once: with its result, or a `GATTClientError` (an ATT error, a timeout, a
/// disconnection) — when the bearer closes, the running procedure and every waiting one fail.
///
/// Loop-confined: call it on the bearer's loop; every handler and completion runs there.
public final class GATTClient: ATTBearerListener, @unchecked Sendable {
    public let bearer: any GATTClientBearer
    /// Procedures that may wait behind the running one; more fail with `.queueFull`.
    public var maximumQueuedProcedures = 32
    /// `corebluetooth.gatt` (tagged with the link by its owner): what the client drops.
    public var logger: Logger {
        get { logSource.logger }
        set { logSource.logger = newValue }
    }
    /// Where `logger` comes from, made when first used: the standard one unless the owner sets
    /// its link's (``LazyLogger/init(_:link:)``).
    public var logSource = LazyLogger(standard: .gatt)

    /// The server's database changed in this range (a Service Changed indication): what was
    /// discovered there is stale and must be discovered again.
    public var onServiceChanged: ((ClosedRange<ATTHandle>) -> Void)?
    /// The value handle of the Service Changed characteristic, learned when characteristic
    /// discovery finds it (or set from a cache).
    public var serviceChangedHandle: ATTHandle?
    /// A notification or indication for a value nobody subscribed to through this client.
    public var onUnhandledValue: ((ATTHandle, [UInt8]) -> Void)?
    /// `writeWithoutResponse` returned false earlier and the link can take more now.
    public var onReadyToSendWriteWithoutResponse: (() -> Void)?
    /// Whether the last write without response was taken; false until the link drains after
    /// a refusal (what `canSendWriteWithoutResponse` reports).
    public private(set) var canSendWriteWithoutResponse = true
    /// Called once when the bearer closes, after every procedure failed.
    public var onClose: ((GATTClientError) -> Void)?
    /// Set once the bearer closed: what every procedure fails with from then on.
    @exclusivity(unchecked) public private(set) var closeError: GATTClientError?  // exclusivity checks: 0.07 % of pair

    @exclusivity(unchecked) private var valueHandlers = IntegerKeyMap<ATTHandle, ([UInt8]) -> Void>()  // exclusivity checks: 0.28 % of notify

    private struct Procedure {
        let start: () -> Void
        let fail: (GATTClientError) -> Void
    }
    private var waiting: [Procedure] = []
    private var running: Procedure?
    private var isDispatching = false

    /// A client on `bearer`: it takes over the bearer's notification and indication handlers
    /// and listens to it for readiness to send and the close.
    public init(bearer: any GATTClientBearer) {
        self.bearer = bearer
        // Not `[weak self]`: see `WeakHandle` (a weakly referenced object pays on every retain).
        let weakSelf = WeakHandle(self)
        bearer.onNotification = { handle, value in weakSelf.object?.deliver(handle, value, isIndication: false) }
        bearer.onMultipleNotification = { values in
            for (handle, value) in values { weakSelf.object?.deliver(handle, value, isIndication: false) }
        }
        bearer.onIndication = { handle, value in weakSelf.object?.deliver(handle, value, isIndication: true) }
        bearer.addListener(self)
        if !bearer.isOpen { closeError = .disconnected }
    }

    /// Procedures running or waiting.
    public var pendingProcedures: Int { waiting.count + (running == nil ? 0 : 1) }

    // MARK: - Server configuration (§4.3)

    /// Exchange MTU: offers the bearer's preferred Rx MTU; completes with the new ATT_MTU.
    public func exchangeMTU(completion: @escaping (Result<Int, GATTClientError>) -> Void) {
        enqueue(completion) { [self] finish in
            bearer.exchangeMTU { finish($0.mapError(GATTClientError.init)) }
        }
    }

    // MARK: - Primary service discovery (§4.4)

    /// Discover All Primary Services: Read By Group Type of «Primary Service» from 0x0001,
    /// continued after each response's last group until Attribute Not Found or 0xFFFF.
    public func discoverPrimaryServices(completion: @escaping (Result<[DiscoveredService], GATTClientError>) -> Void) {
        enqueue(completion) { [self] finish in
            page(.min ... .max, request: {
                .readByGroupTypeRequest(.init(startingHandle: $0.lowerBound, endingHandle: $0.upperBound,
                                              attributeGroupType: .primaryService))
            }, parse: { response, range in
                guard case .readByGroupTypeResponse(let r) = response else { throw Self.unexpected(response) }
                let services = try r.attributeData.map { data in
                    guard data.endGroupHandle >= data.handle else {
                        throw Malformed("service \(data.handle) ends before it starts, at \(data.endGroupHandle)")
                    }
                    return DiscoveredService(uuid: try Self.uuid(data.value), handles: data.handle...data.endGroupHandle)
                }
                try Self.checkAscending(services.map(\.handles.lowerBound), in: range)
                return (services, services.last!.handles.upperBound)
            }, completion: finish)
        }
    }

    /// Discover Primary Service by Service UUID: Find By Type Value of «Primary Service» with
    /// the UUID as value, continued after each response's last group.
    public func discoverPrimaryServices(uuid: BluetoothUUID,
                                        completion: @escaping (Result<[DiscoveredService], GATTClientError>) -> Void) {
        let value = uuid.littleEndianBytes(length: ATTUUIDFormat.shortest(for: uuid).byteCount) ?? []
        enqueue(completion) { [self] finish in
            page(.min ... .max, request: {
                .findByTypeValueRequest(.init(startingHandle: $0.lowerBound, endingHandle: $0.upperBound,
                                              attributeType: .primaryService, attributeValue: value))
            }, parse: { response, range in
                guard case .findByTypeValueResponse(let r) = response, !r.handlesInformation.isEmpty else {
                    throw Self.unexpected(response)
                }
                let services = try r.handlesInformation.map { info in
                    guard info.groupEndHandle >= info.foundAttributeHandle else {
                        throw Malformed("service \(info.foundAttributeHandle) ends before it starts")
                    }
                    return DiscoveredService(uuid: uuid, handles: info.foundAttributeHandle...info.groupEndHandle)
                }
                try Self.checkAscending(services.map(\.handles.lowerBound), in: range)
                return (services, services.last!.handles.upperBound)
            }, completion: finish)
        }
    }

    // MARK: - Relationship discovery (§4.5)

    /// Find Included Services: Read By Type of «Include» over the service. An include without
    /// a 16-bit UUID (its service has a 128-bit one) is completed by reading the included
    /// service's declaration.
    public func discoverIncludedServices(
        of service: DiscoveredService,
        completion: @escaping (Result<[DiscoveredIncludedService], GATTClientError>) -> Void
    ) {
        enqueue(completion) { [self] finish in
            page(service.handles, request: {
                .readByTypeRequest(.init(startingHandle: $0.lowerBound, endingHandle: $0.upperBound, attributeType: .include))
            }, parse: { response, range in
                guard case .readByTypeResponse(let r) = response else { throw Self.unexpected(response) }
                let includes = try r.attributeData.map { data -> (ATTHandle, ClosedRange<ATTHandle>, BluetoothUUID?) in
                    var reader = ByteReader(data.value, context: "include declaration \(data.handle)")
                    let start = ATTHandle(try reader.u16())
                    let end = ATTHandle(try reader.u16())
                    let uuid = reader.isAtEnd ? nil : try reader.uuid(length: 2)
                    try reader.expectEnd()
                    guard start.isValid, end >= start else { throw Malformed("include \(data.handle) names \(start)…\(end)") }
                    return (data.handle, start...end, uuid)
                }
                try Self.checkAscending(includes.map(\.0), in: range)
                return (includes, includes.last!.0)
            }, completion: { result in
                switch result {
                case .failure(let error): finish(.failure(error))
                case .success(let includes): self.resolveIncludeUUIDs(includes[...], found: [], finish)
                }
            })
        }
    }

    /// Reads the 128-bit UUID of each include that did not carry a 16-bit one (§4.5.1).
    private func resolveIncludeUUIDs(_ rest: ArraySlice<(ATTHandle, ClosedRange<ATTHandle>, BluetoothUUID?)>,
                                     found: [DiscoveredIncludedService],
                                     _ finish: @escaping (Result<[DiscoveredIncludedService], GATTClientError>) -> Void) {
        guard let (declaration, handles, uuid) = rest.first else { return finish(.success(found)) }
        if let uuid {
            return resolveIncludeUUIDs(rest.dropFirst(), found: found + [.init(declarationHandle: declaration, uuid: uuid, handles: handles)], finish)
        }
        send(.readRequest(.init(attributeHandle: handles.lowerBound))) { [self] result in
            switch result {
            case .failure(let error): finish(.failure(error))
            case .success(let response):
                guard case .readResponse(let r) = response, r.attributeValue.count == 16,
                      let uuid = BluetoothUUID(littleEndian: r.attributeValue) else {
                    return finish(.failure(.protocolViolation("the declaration of included service \(handles.lowerBound) holds no 128-bit UUID")))
                }
                resolveIncludeUUIDs(rest.dropFirst(), found: found + [.init(declarationHandle: declaration, uuid: uuid, handles: handles)], finish)
            }
        }
    }

    // MARK: - Characteristic discovery (§4.6)

    /// Discover All Characteristics of a Service (or, with `uuid`, Discover Characteristics by
    /// UUID: all are discovered, since each one's end handle needs the next declaration, and
    /// the others are left out). Read By Type of «Characteristic» over the service range.
    /// Finding the Service Changed characteristic sets `serviceChangedHandle`.
    public func discoverCharacteristics(
        of service: DiscoveredService, uuid: BluetoothUUID? = nil,
        completion: @escaping (Result<[DiscoveredCharacteristic], GATTClientError>) -> Void
    ) {
        enqueue(completion) { [self] finish in
            discoverCharacteristics(in: service.handles) { result in
                finish(result.map { all in all.filter { uuid == nil || $0.uuid == uuid } })
            }
        }
    }

    private func discoverCharacteristics(in range: ClosedRange<ATTHandle>,
                                         _ completion: @escaping (Result<[DiscoveredCharacteristic], GATTClientError>) -> Void) {
        page(range, request: {
            .readByTypeRequest(.init(startingHandle: $0.lowerBound, endingHandle: $0.upperBound, attributeType: .characteristic))
        }, parse: { response, range in
            guard case .readByTypeResponse(let r) = response else { throw Self.unexpected(response) }
            let declarations = try r.attributeData.map { data in
                var reader = ByteReader(data.value, context: "characteristic declaration \(data.handle)")
                let properties = GATTCharacteristicProperties(rawValue: try reader.u8())
                let valueHandle = ATTHandle(try reader.u16())
                let uuid = try Self.uuid(reader.rest())
                guard valueHandle > data.handle, valueHandle <= range.upperBound else {
                    throw Malformed("characteristic declaration \(data.handle) names value handle \(valueHandle)")
                }
                // The end handle is filled in once the next declaration is known.
                return DiscoveredCharacteristic(uuid: uuid, declarationHandle: data.handle, valueHandle: valueHandle,
                                                properties: properties, endHandle: range.upperBound)
            }
            try Self.checkAscending(declarations.map(\.declarationHandle), in: range)
            return (declarations, declarations.last!.declarationHandle)
        }, completion: { [self] result in
            completion(result.map { declarations in
                var characteristics = declarations
                for i in characteristics.indices.dropLast() {
                    characteristics[i].endHandle = ATTHandle(characteristics[i + 1].declarationHandle.rawValue - 1)
                }
                if let serviceChanged = characteristics.first(where: { $0.uuid == .serviceChanged }) {
                    serviceChangedHandle = serviceChanged.valueHandle
                }
                return characteristics
            })
        })
    }

    // MARK: - Characteristic descriptor discovery (§4.7)

    /// Discover All Characteristic Descriptors: Find Information from the value handle + 1 to
    /// the characteristic's end (no request when that range is empty).
    public func discoverDescriptors(of characteristic: DiscoveredCharacteristic,
                                    completion: @escaping (Result<[DiscoveredDescriptor], GATTClientError>) -> Void) {
        enqueue(completion) { [self] finish in findDescriptors(of: characteristic, finish) }
    }

    private func findDescriptors(of characteristic: DiscoveredCharacteristic,
                                 _ completion: @escaping (Result<[DiscoveredDescriptor], GATTClientError>) -> Void) {
        guard let range = characteristic.descriptorHandles else { return completion(.success([])) }
        page(range, request: {
            .findInformationRequest(.init(startingHandle: $0.lowerBound, endingHandle: $0.upperBound))
        }, parse: { response, range in
            guard case .findInformationResponse(let r) = response else { throw Self.unexpected(response) }
            let descriptors = r.entries.map { DiscoveredDescriptor(uuid: $0.type, handle: $0.handle) }
            try Self.checkAscending(descriptors.map(\.handle), in: range)
            return (descriptors, descriptors.last!.handle)
        }, completion: completion)
    }

    // MARK: - Reads (§4.8)

    /// Read Characteristic Value (or a descriptor): a Read Request, continued with Read Blob
    /// Requests while each part fills the response (ATT_MTU − 1 octets). A shorter part ends
    /// the value, as do Attribute Not Long on the first Read Blob and Invalid Offset (the
    /// value ends exactly at the offset asked for).
    public func readValue(of handle: ATTHandle, completion: @escaping (Result<[UInt8], GATTClientError>) -> Void) {
        enqueue(completion) { [self] finish in
            send(.readRequest(.init(attributeHandle: handle))) { [self] result in
                switch result {
                case .failure(let error): finish(.failure(error))
                case .success(.readResponse(let r)):
                    continueLongRead(handle, value: r.attributeValue, lastPart: r.attributeValue.count,
                                     firstBlob: true, finish)
                case .success(let other): finish(.failure(.protocolViolation(Self.unexpected(other).what)))
                }
            }
        }
    }

    private func continueLongRead(_ handle: ATTHandle, value: [UInt8], lastPart: Int, firstBlob: Bool,
                                  _ finish: @escaping (Result<[UInt8], GATTClientError>) -> Void) {
        // Only a part that filled the PDU may have more behind it.
        guard lastPart > 0, lastPart >= ATTMTU.maximumReadValueLength(mtu: bearer.mtu) else {
            return finish(.success(value))
        }
        guard let offset = UInt16(exactly: value.count) else {
            return finish(.failure(.protocolViolation("value of \(handle) runs past offset 0xFFFF")))
        }
        send(.readBlobRequest(.init(attributeHandle: handle, valueOffset: offset))) { [self] result in
            switch result {
            case .failure(.attributeError(.attributeNotLong, _)) where firstBlob:
                finish(.success(value))
            case .failure(.attributeError(.invalidOffset, _)):
                finish(.success(value))
            case .failure(let error):
                finish(.failure(error))
            case .success(.readBlobResponse(let r)):
                continueLongRead(handle, value: value + r.partAttributeValue, lastPart: r.partAttributeValue.count,
                                 firstBlob: false, finish)
            case .success(let other):
                finish(.failure(.protocolViolation(Self.unexpected(other).what)))
            }
        }
    }

    /// Read Using Characteristic UUID: Read By Type of `uuid` over `range`, continued after
    /// the last handle returned. Values come as the server cut them (at most ATT_MTU − 4
    /// octets); read a longer one with `readValue(of:)`. Empty when nothing matches.
    public func readValues(ofType uuid: BluetoothUUID, in range: ClosedRange<ATTHandle> = .min ... .max,
                           completion: @escaping (Result<[(handle: ATTHandle, value: [UInt8])], GATTClientError>) -> Void) {
        enqueue(completion) { [self] finish in
            page(range, request: {
                .readByTypeRequest(.init(startingHandle: $0.lowerBound, endingHandle: $0.upperBound, attributeType: uuid))
            }, parse: { response, range in
                guard case .readByTypeResponse(let r) = response else { throw Self.unexpected(response) }
                let values = r.attributeData.map { (handle: $0.handle, value: $0.value) }
                try Self.checkAscending(values.map(\.handle), in: range)
                return (values, values.last!.handle)
            }, completion: finish)
        }
    }

    /// Read Multiple Characteristic Values: the values concatenated (cut at ATT_MTU − 1 octets;
    /// every value but the last must have a length the caller knows).
    public func readMultipleValues(of handles: [ATTHandle], completion: @escaping (Result<[UInt8], GATTClientError>) -> Void) {
        guard handles.count >= 2 else { return completion(.failure(.invalidArgument("Read Multiple needs two or more handles"))) }
        enqueue(completion) { [self] finish in
            send(.readMultipleRequest(.init(setOfHandles: handles))) { result in
                switch result {
                case .failure(let error): finish(.failure(error))
                case .success(.readMultipleResponse(let r)): finish(.success(r.setOfValues))
                case .success(let other): finish(.failure(.protocolViolation(Self.unexpected(other).what)))
                }
            }
        }
    }

    /// Read Multiple Variable Length Characteristic Values: one value per handle, in order.
    /// When they did not all fit in one response, the list stops early and its last value may
    /// be cut; read those with `readValue(of:)`.
    public func readMultipleVariableValues(of handles: [ATTHandle],
                                           completion: @escaping (Result<[[UInt8]], GATTClientError>) -> Void) {
        guard handles.count >= 2 else {
            return completion(.failure(.invalidArgument("Read Multiple Variable needs two or more handles")))
        }
        enqueue(completion) { [self] finish in
            send(.readMultipleVariableRequest(.init(setOfHandles: handles))) { result in
                switch result {
                case .failure(let error): finish(.failure(error))
                case .success(.readMultipleVariableResponse(let r)) where r.lengthValueTupleList.count <= handles.count:
                    finish(.success(r.lengthValueTupleList.map(\.value)))
                case .success(let other): finish(.failure(.protocolViolation(Self.unexpected(other).what)))
                }
            }
        }
    }

    // MARK: - Writes (§4.9)

    /// Write Characteristic Value (or a descriptor) with a Write Request; a value longer than
    /// ATT_MTU − 3 octets goes as a long write instead.
    public func writeValue(_ value: [UInt8], to handle: ATTHandle, completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        enqueue(completion) { [self] finish in
            guard value.count <= ATTMTU.maximumWriteValueLength(mtu: bearer.mtu) else {
                return preparedWrite([(handle, value)], finish)
            }
            send(.writeRequest(.init(attributeHandle: handle, attributeValue: value))) { result in
                switch result {
                case .failure(let error): finish(.failure(error))
                case .success(.writeResponse): finish(.success(()))
                case .success(let other): finish(.failure(.protocolViolation(Self.unexpected(other).what)))
                }
            }
        }
    }

    /// Write Long Characteristic Values: Prepare Write Requests of ATT_MTU − 5 octets, each
    /// echo checked, then Execute Write. An altered echo cancels the queue (Execute Write with
    /// flags 0x00) and fails with `.writeVerificationFailed`; an error response cancels it too.
    public func writeLongValue(_ value: [UInt8], to handle: ATTHandle,
                               completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        enqueue(completion) { [self] finish in preparedWrite([(handle, value)], finish) }
    }

    /// Reliable Writes: every value prepared (in ATT_MTU − 5 octet parts, each echo checked),
    /// then all written at once by Execute Write — or none, when an echo differs or the server
    /// refuses a part (the queue is cancelled).
    public func reliableWrite(_ values: [(handle: ATTHandle, value: [UInt8])],
                              completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        guard !values.isEmpty else { return completion(.failure(.invalidArgument("a reliable write needs a value"))) }
        enqueue(completion) { [self] finish in preparedWrite(values.map { ($0.handle, $0.value) }, finish) }
    }

    /// Write Without Response: a Write Command, now. False when the value is longer than
    /// ATT_MTU − 3, the bearer is closed, or the link's queue is full — then
    /// `canSendWriteWithoutResponse` stays false until `onReadyToSendWriteWithoutResponse`.
    public func writeWithoutResponse(_ value: [UInt8], to handle: ATTHandle) -> Bool {
        guard closeError == nil, value.count <= ATTMTU.maximumWriteValueLength(mtu: bearer.mtu) else { return false }
        guard bearer.sendCommand(.writeCommand(.init(attributeHandle: handle, attributeValue: value))) else {
            canSendWriteWithoutResponse = false
            return false
        }
        return true
    }

    /// The bearer can take commands again (`ATTBearerListener`).
    public func attBearerIsReadyToSend() {
        guard !canSendWriteWithoutResponse else { return }
        canSendWriteWithoutResponse = true
        onReadyToSendWriteWithoutResponse?()
    }

    private struct PreparedPart: Equatable {
        var handle: ATTHandle
        var offset: UInt16
        var value: [UInt8]
    }

    /// Prepares every part, checking each echo, then executes; cancels on any failure.
    private func preparedWrite(_ values: [(ATTHandle, [UInt8])], _ finish: @escaping (Result<Void, GATTClientError>) -> Void) {
        let chunk = ATTMTU.maximumPrepareWriteValueLength(mtu: bearer.mtu)
        var parts: [PreparedPart] = []
        for (handle, value) in values {
            guard value.count <= Int(UInt16.max) + 1 else {
                return finish(.failure(.invalidArgument("a value of \(value.count) octets has offsets past 0xFFFF")))
            }
            // An empty value still needs one (empty) part to be written.
            for start in stride(from: 0, to: max(value.count, 1), by: chunk) {
                parts.append(PreparedPart(handle: handle, offset: UInt16(start),
                                          value: Array(value[start..<min(start + chunk, value.count)])))
            }
        }
        prepare(parts[...], finish)
    }

    private func prepare(_ parts: ArraySlice<PreparedPart>, _ finish: @escaping (Result<Void, GATTClientError>) -> Void) {
        guard let part = parts.first else { return execute(.write, finish) }
        send(.prepareWriteRequest(.init(attributeHandle: part.handle, valueOffset: part.offset,
                                        partAttributeValue: part.value))) { [self] result in
            switch result {
            case .failure(let error) where error == .timeout || error == .disconnected:
                finish(.failure(error))
            case .failure(let error):
                cancelPreparedWrites(then: error, finish)
            case .success(.prepareWriteResponse(let echo)):
                guard PreparedPart(handle: echo.attributeHandle, offset: echo.valueOffset, value: echo.partAttributeValue) == part else {
                    return cancelPreparedWrites(then: .writeVerificationFailed(handle: part.handle, offset: part.offset), finish)
                }
                prepare(parts.dropFirst(), finish)
            case .success(let other):
                cancelPreparedWrites(then: .protocolViolation(Self.unexpected(other).what), finish)
            }
        }
    }

    /// Execute Write with flags 0x00, then fails with `error` whatever the server answers.
    private func cancelPreparedWrites(then error: GATTClientError, _ finish: @escaping (Result<Void, GATTClientError>) -> Void) {
        execute(.cancel) { _ in finish(.failure(error)) }
    }

    private func execute(_ flags: ATTPDU.ExecuteWriteRequest.Flags, _ finish: @escaping (Result<Void, GATTClientError>) -> Void) {
        send(.executeWriteRequest(.init(flags: flags))) { result in
            switch result {
            case .failure(let error): finish(.failure(error))
            case .success(.executeWriteResponse): finish(.success(()))
            case .success(let other): finish(.failure(.protocolViolation(Self.unexpected(other).what)))
            }
        }
    }

    // MARK: - Notifications and indications (§4.10, §4.11)

    /// Subscribes to the characteristic's value: notifications when it offers them, else
    /// indications. `clientConfiguration` is its CCCD; nil finds it with Find Information
    /// first. `onValue` gets every value from the moment the CCCD write is sent, so one that
    /// arrives before the write response is not lost. Completes with what was enabled.
    public func subscribe(to characteristic: DiscoveredCharacteristic, clientConfiguration: ATTHandle? = nil,
                          onValue: @escaping ([UInt8]) -> Void,
                          completion: @escaping (Result<GATTClientConfiguration, GATTClientError>) -> Void) {
        let configuration: GATTClientConfiguration =
            characteristic.properties.contains(.notify) ? .notification
            : characteristic.properties.contains(.indicate) ? .indication : []
        guard !configuration.isEmpty else {
            return completion(.failure(.notSubscribable(characteristic.valueHandle)))
        }
        enqueue(completion) { [self] finish in
            findClientConfiguration(of: characteristic, given: clientConfiguration) { [self] found in
                guard case .success(let cccd) = found else { return finish(found.map { _ in [] }) }
                let valueHandle = characteristic.valueHandle
                let previous = valueHandlers.updateValue(onValue, forKey: valueHandle)
                writeClientConfiguration(configuration, to: cccd) { [self] result in
                    if case .failure = result { valueHandlers[valueHandle] = previous }
                    finish(result.map { configuration })
                }
            }
        }
    }

    /// Writes 0x0000 to the characteristic's CCCD, then stops delivering its values.
    public func unsubscribe(from characteristic: DiscoveredCharacteristic, clientConfiguration: ATTHandle? = nil,
                            completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        enqueue(completion) { [self] finish in
            findClientConfiguration(of: characteristic, given: clientConfiguration) { [self] found in
                guard case .success(let cccd) = found else { return finish(found.map { _ in () }) }
                writeClientConfiguration([], to: cccd) { [self] result in
                    if case .success = result { valueHandlers[characteristic.valueHandle] = nil }
                    finish(result)
                }
            }
        }
    }

    private func findClientConfiguration(of characteristic: DiscoveredCharacteristic, given: ATTHandle?,
                                         _ completion: @escaping (Result<ATTHandle, GATTClientError>) -> Void) {
        if let given { return completion(.success(given)) }
        findDescriptors(of: characteristic) { result in
            completion(result.flatMap { descriptors in
                guard let cccd = descriptors.first(where: { $0.uuid == .clientCharacteristicConfiguration }) else {
                    return .failure(.notSubscribable(characteristic.valueHandle))
                }
                return .success(cccd.handle)
            })
        }
    }

    private func writeClientConfiguration(_ configuration: GATTClientConfiguration, to cccd: ATTHandle,
                                          _ completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        let value = [UInt8(truncatingIfNeeded: configuration.rawValue), UInt8(configuration.rawValue >> 8)]
        send(.writeRequest(.init(attributeHandle: cccd, attributeValue: value))) { result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(.writeResponse): completion(.success(()))
            case .success(let other): completion(.failure(.protocolViolation(Self.unexpected(other).what)))
            }
        }
    }

    private func deliver(_ handle: ATTHandle, _ value: [UInt8], isIndication: Bool) {
        if let handler = valueHandlers[handle] {
            handler(value)
        } else if handle != serviceChangedHandle {
            onUnhandledValue?(handle, value)
        }
        if isIndication, handle == serviceChangedHandle { serviceChanged(value) }
    }

    /// The Service Changed value: the first and last handle affected (§7.1).
    private func serviceChanged(_ value: [UInt8]) {
        var reader = ByteReader(value, context: "Service Changed")
        guard let start = try? ATTHandle(reader.u16()), let end = try? ATTHandle(reader.u16()), reader.isAtEnd,
              start.isValid, start <= end else {
            logger.debug("malformed Service Changed value \(value.hexString) ignored")
            return
        }
        onServiceChanged?(start...end)
    }

    // MARK: - Procedure queue

    /// Queues a procedure; `body` runs when the ones before it have finished and calls its
    /// `finish` once. The completion runs exactly once.
    private func enqueue<T>(_ completion: @escaping (Result<T, GATTClientError>) -> Void,
                            _ body: @escaping (_ finish: @escaping (Result<T, GATTClientError>) -> Void) -> Void) {
        if let closeError { return completion(.failure(closeError)) }
        guard waiting.count < maximumQueuedProcedures else { return completion(.failure(.queueFull)) }
        let state = ProcedureState()
        let finish: (Result<T, GATTClientError>) -> Void = { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard !state.isFinished else { return }
            state.isFinished = true
            completion(result)
            if state.isStarted { self?.procedureFinished() }
        }
        waiting.append(Procedure(start: { state.isStarted = true; body(finish) }, fail: { finish(.failure($0)) }))
        startNext()
    }

    private final class ProcedureState {
        var isStarted = false
        var isFinished = false
    }

    private func startNext() {
        // A procedure finishing inside `start` lands back here: the outer loop goes on.
        guard !isDispatching else { return }
        isDispatching = true
        defer { isDispatching = false }
        while running == nil, !waiting.isEmpty {
            let next = waiting.removeFirst()
            if let closeError {
                next.fail(closeError)
                continue
            }
            running = next
            next.start()
        }
    }

    private func procedureFinished() {
        running = nil
        startNext()
    }

    /// The bearer closed (`ATTBearerListener`): every procedure fails.
    public func attBearerDidClose(_ reason: ATTBearer.CloseReason) {
        guard closeError == nil else { return }
        let error: GATTClientError = reason == .transactionTimeout ? .timeout : .disconnected
        closeError = error
        // The bearer failed the outstanding request already; this covers a procedure between
        // steps, then every waiting one.
        running?.fail(error)
        while !waiting.isEmpty { waiting.removeFirst().fail(error) }
        valueHandlers.removeAll()
        onClose?(error)
    }

    // MARK: - Helpers

    private func send(_ pdu: ATTPDU, _ completion: @escaping (Result<ATTPDU, GATTClientError>) -> Void) {
        bearer.request(pdu) { completion($0.mapError(GATTClientError.init)) }
    }

    /// Pages a discovery through `range`: `request` asks for a sub-range, `parse` turns the
    /// response into items and the last handle it covered. Continues after that handle until
    /// the end of the range or Attribute Not Found (which ends it successfully).
    private func page<Item>(
        _ range: ClosedRange<ATTHandle>, found: [Item] = [],
        request: @escaping (ClosedRange<ATTHandle>) -> ATTPDU,
        parse: @escaping (ATTPDU, ClosedRange<ATTHandle>) throws -> (items: [Item], last: ATTHandle),
        completion: @escaping (Result<[Item], GATTClientError>) -> Void
    ) {
        send(request(range)) { [self] result in
            switch result {
            case .failure(.attributeError(.attributeNotFound, _)):
                completion(.success(found))
            case .failure(let error):
                completion(.failure(error))
            case .success(let response):
                let parsed: (items: [Item], last: ATTHandle)
                do { parsed = try parse(response, range) } catch {
                    return completion(.failure(.protocolViolation("\(error)")))
                }
                let all = found + parsed.items
                guard let next = parsed.last.next, next <= range.upperBound else { return completion(.success(all)) }
                page(next...range.upperBound, found: all, request: request, parse: parse, completion: completion)
            }
        }
    }

    private struct Malformed: Error, CustomStringConvertible {
        let what: String
        init(_ what: String) { self.what = what }
        var description: String { what }
    }

    private static func unexpected(_ response: ATTPDU) -> Malformed {
        Malformed("unexpected \(response.opcode.name)")
    }

    private static func uuid(_ bytes: [UInt8]) throws -> BluetoothUUID {
        guard bytes.count == 2 || bytes.count == 16, let uuid = BluetoothUUID(littleEndian: bytes) else {
            throw Malformed("a UUID of \(bytes.count) octets")
        }
        return uuid
    }

    /// Handles in a response must be non-empty, ascending and inside the range asked for; this
    /// also keeps a misbehaving server from making a discovery loop forever.
    private static func checkAscending(_ handles: [ATTHandle], in range: ClosedRange<ATTHandle>) throws {
        guard !handles.isEmpty else { throw Malformed("an empty response") }
        var previous: ATTHandle?
        for handle in handles {
            guard range.contains(handle), previous.map({ $0 < handle }) ?? true else {
                throw Malformed("handle \(handle) out of order or outside \(range.lowerBound)…\(range.upperBound)")
            }
            previous = handle
        }
    }
}
