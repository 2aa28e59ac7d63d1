import HCI
import HCIDriver
import L2CAP
import Scheduling

/// What to advertise and how.
public struct AdvertisingParameters: Sendable, Hashable {
    public var connectable: Bool
    public var scannable: Bool
    /// Units of 0.625 ms (0x0020–0x4000).
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    /// At most 31 bytes each with legacy advertising.
    public var data: [UInt8]
    public var scanResponse: [UInt8]
    /// Advertise from the random address set with `LEHost.setRandomAddress(_:completion:)`
    /// (as phones do) rather than the public one.
    public var ownRandomAddress: Bool

    public init(connectable: Bool = true, scannable: Bool = true, intervalMin: UInt16 = 0x00A0, intervalMax: UInt16 = 0x00A0,
                data: [UInt8] = [], scanResponse: [UInt8] = [], ownRandomAddress: Bool = false) {
        self.connectable = connectable
        self.scannable = scannable
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.data = data
        self.scanResponse = scanResponse
        self.ownRandomAddress = ownRandomAddress
    }
}

extension LEHost {
    /// Runs commands one after another, stopping at the first failure.
    func sequence(_ steps: [(@escaping (Result<Void, HCIError>) -> Void) -> Void],
                  completion: @escaping (Result<Void, HCIError>) -> Void) {
        guard let first = steps.first else { return completion(.success(())) }
        first { [self] result in
            switch result {
            case .success: sequence(Array(steps.dropFirst()), completion: completion)
            case .failure: completion(result)
            }
        }
    }

    func step<C: HCICommand>(_ command: C) -> (@escaping (Result<Void, HCIError>) -> Void) -> Void {
        { [driver] done in driver.send(command) { done($0.map { _ in () }) } }
    }

    // MARK: Scanning

    /// Starts scanning: active (asks for scan responses) or passive; the controller's duplicate
    /// filter on or off. Interval and window in units of 0.625 ms.
    public func startScanning(active: Bool, filterDuplicates: Bool, interval: UInt16 = 0x0030, window: UInt16 = 0x0030,
                              completion: @escaping (Result<Void, HCIError>) -> Void) {
        reportAssembler.reset()
        if usesExtendedCommands {
            sequence([
                step(LESetExtendedScanParameters(scanningPHYs: [.init(phy: .le1M, scanType: active ? .active : .passive,
                                                                      scanInterval: interval, scanWindow: window)])),
                step(LESetExtendedScanEnable(enable: true, filterDuplicates: filterDuplicates ? .enabled : .disabled)),
            ], completion: completion)
        } else {
            sequence([
                step(LESetScanParameters(leScanType: active ? .active : .passive, leScanInterval: interval, leScanWindow: window,
                                         ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered)),
                step(LESetScanEnable(leScanEnable: true, filterDuplicates: filterDuplicates)),
            ], completion: completion)
        }
    }

    public func stopScanning(completion: @escaping (Result<Void, HCIError>) -> Void) {
        if usesExtendedCommands {
            sequence([step(LESetExtendedScanEnable(enable: false))], completion: completion)
        } else {
            sequence([step(LESetScanEnable(leScanEnable: false, filterDuplicates: false))], completion: completion)
        }
    }

    // MARK: Advertising

    /// Starts advertising with legacy PDUs in advertising set `set` (0 with legacy commands;
    /// below `supportedAdvertisingSets` with extended ones). Starting a set that advertises
    /// replaces its parameters and data.
    public func startAdvertising(_ parameters: AdvertisingParameters, set: UInt8 = 0,
                                 completion: @escaping (Result<Void, HCIError>) -> Void) {
        guard Int(set) < (usesExtendedCommands ? supportedAdvertisingSets : 1) else {
            return completion(.failure(.notSupported("the controller has no advertising set \(set)")))
        }
        guard parameters.data.count <= 31, parameters.scanResponse.count <= 31 else {
            return completion(.failure(.notSupported("legacy advertising carries at most 31 bytes of data and of scan response")))
        }
        let randomAddress = parameters.ownRandomAddress ? self.randomAddress : nil
        guard !parameters.ownRandomAddress || randomAddress != nil else {
            return completion(.failure(.notSupported("no random address set")))
        }
        let ownAddressType = ownAddressType(random: randomAddress != nil)
        // Parameters cannot change while the set advertises (Command Disallowed): off first.
        let restart = advertisingSets.contains(set)
        let done: (Result<Void, HCIError>) -> Void = { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            switch result {
            case .success: self?.advertisingSets.insert(set)
            // Whether the set is off now or not, nothing it advertises is what was asked.
            case .failure: if restart { self?.advertisingSets.remove(set) }
            }
            completion(result)
        }
        if usesExtendedCommands {
            var properties: LESetExtendedAdvertisingParameters.EventProperties = [.legacy]
            if parameters.connectable { properties.insert(.connectable) }
            if parameters.scannable || parameters.connectable { properties.insert(.scannable) }
            var steps = restart ? [step(LESetExtendedAdvertisingEnable(enable: false, sets: [.init(advertisingHandle: set)]))] : []
            steps.append(
                step(LESetExtendedAdvertisingParameters(
                    advertisingHandle: set, advertisingEventProperties: properties,
                    primaryAdvertisingIntervalMin: UInt32(parameters.intervalMin),
                    primaryAdvertisingIntervalMax: UInt32(parameters.intervalMax), ownAddressType: ownAddressType)))
            if let randomAddress { steps.append(step(LESetAdvertisingSetRandomAddress(advertisingHandle: set, randomAddress: randomAddress))) }
            sequence(steps + [
                step(LESetExtendedAdvertisingData(advertisingHandle: set, advertisingData: parameters.data)),
                step(LESetExtendedScanResponseData(advertisingHandle: set, scanResponseData: parameters.scanResponse)),
                step(LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: set)])),
            ], completion: done)
        } else {
            let type: LESetAdvertisingParameters.AdvertisingType =
                parameters.connectable ? .advInd : (parameters.scannable ? .advScanInd : .advNonconnInd)
            let off = restart ? [step(LESetAdvertisingEnable(advertisingEnable: false))] : []
            sequence(off + [
                step(LESetAdvertisingParameters(
                    advertisingIntervalMin: parameters.intervalMin, advertisingIntervalMax: parameters.intervalMax,
                    advertisingType: type, ownAddressType: ownAddressType, peerAddressType: .publicDevice, peerAddress: .zero,
                    advertisingChannelMap: 0x07, advertisingFilterPolicy: .acceptAll)),
                step(LESetAdvertisingData(advertisingData: parameters.data)),
                step(LESetScanResponseData(scanResponseData: parameters.scanResponse)),
                step(LESetAdvertisingEnable(advertisingEnable: true)),
            ], completion: done)
        }
    }

    /// Stops advertising set `set`.
    public func stopAdvertising(set: UInt8 = 0, completion: @escaping (Result<Void, HCIError>) -> Void) {
        let done: (Result<Void, HCIError>) -> Void = { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            if case .success = result { self?.advertisingSets.remove(set) }
            completion(result)
        }
        if usesExtendedCommands {
            sequence([step(LESetExtendedAdvertisingEnable(enable: false, sets: [.init(advertisingHandle: set)]))], completion: done)
        } else {
            sequence([step(LESetAdvertisingEnable(advertisingEnable: false))], completion: done)
        }
    }

    // MARK: Connections

    /// Starts connecting to `peer`. The attempt never times out by itself: it ends with
    /// `didConnect`, or `didFailToConnectTo` after `cancelConnecting`. `completion` says whether
    /// the controller took the request.
    ///
    /// With `ownRandomAddress` the connection is made from the random address set with
    /// `setRandomAddress(_:completion:)` (as phones connect), else from the public address.
    public func connect(to peer: LEAddress, parameters: ConnectionParameters = ConnectionParameters(
                            intervalMin: 0x0018, intervalMax: 0x0028, latency: 0, timeout: 0x01F4),
                        ownRandomAddress: Bool = false,
                        completion: @escaping (Result<Void, HCIError>) -> Void) {
        guard parameters.isValid else { return completion(.failure(.notSupported("invalid connection parameters"))) }
        guard !ownRandomAddress || randomAddress != nil else {
            return completion(.failure(.notSupported("no random address set")))
        }
        let ownAddressType = ownAddressType(random: ownRandomAddress)
        connecting = peer
        let peer = addressForInitiating(peer)
        let done: (Result<Void, HCIError>) -> Void = { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            if case .failure = result { self?.connecting = nil }
            completion(result)
        }
        if usesExtendedCommands {
            sequence([step(LEExtendedCreateConnection(
                ownAddressType: ownAddressType, peerAddressType: peer.type, peerAddress: peer.address,
                initiatingPHYs: [.init(phy: .le1M, scanInterval: 0x0030, scanWindow: 0x0030,
                                       connectionIntervalMin: parameters.intervalMin, connectionIntervalMax: parameters.intervalMax,
                                       maxLatency: parameters.latency, supervisionTimeout: parameters.timeout)]))], completion: done)
        } else {
            sequence([step(LECreateConnection(
                leScanInterval: 0x0030, leScanWindow: 0x0030, initiatorFilterPolicy: .peerAddress,
                peerAddressType: peer.type, peerAddress: peer.address, ownAddressType: ownAddressType,
                connectionIntervalMin: parameters.intervalMin, connectionIntervalMax: parameters.intervalMax,
                maxLatency: parameters.latency, supervisionTimeout: parameters.timeout, minCELength: 0, maxCELength: 0))],
                     completion: done)
        }
    }

    /// Sets the controller's random address (LE Set Random Address): a static random address
    /// (top two bits 11) for `connect(to:ownRandomAddress:)`. Call while not advertising,
    /// scanning or connecting.
    public func setRandomAddress(_ address: BluetoothAddress, completion: @escaping (Result<Void, HCIError>) -> Void) {
        sequence([step(LESetRandomAddress(randomAddress: address))]) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            if case .success = result { self?.randomAddress = address }
            completion(result)
        }
    }

    /// A static random address derived from a public one: the same low 46 bits with the top two
    /// bits 11 (Vol 6 Part B §1.3.2.1), so a device keeps one identity across runs.
    public static func staticRandomAddress(from publicAddress: BluetoothAddress) -> BluetoothAddress {
        var value = publicAddress.value | (0b11 << 46)
        let random = value & ((1 << 46) - 1)
        // The random part may be neither all zeros nor all ones.
        if random == 0 { value |= 1 } else if random == (1 << 46) - 1 { value &= ~1 }
        return BluetoothAddress(value: value)
    }

    /// Cancels the connection attempt in progress; it ends with `didFailToConnectTo`.
    ///
    /// The controller must follow a successful cancel with an LE Connection Complete (Unknown
    /// Connection Identifier, Vol 4 Part E §7.8.13). Some never do (Bumble's, 0.0.236, answers
    /// success and goes on initiating): after `cancelCompletionGrace` without it the attempt
    /// ends as that event would end it, and `awaitsLateCancelOutcome` says the controller may
    /// still report on it.
    public func cancelConnecting(completion: @escaping (Result<Void, HCIError>) -> Void) {
        sequence([step(LECreateConnectionCancel())]) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            if case .success = result, let self, self.connecting != nil {
                self.cancelWatchdog?.cancel()
                self.cancelWatchdog = self.loop.schedule(after: Self.cancelCompletionGrace) { [weakSelf = WeakHandle(self)] in
                    let `self` = weakSelf.object
                    self?.cancelCompletionOverdue()
                }
            }
            completion(result)
        }
    }

    /// The controller said it cancelled the attempt but never sent its LE Connection Complete.
    private func cancelCompletionOverdue() {
        cancelWatchdog = nil
        guard let target = connecting else { return }
        logger.warning("the controller accepted LE Create Connection Cancel but sent no LE Connection Complete within \(Self.cancelCompletionGrace) (a controller quirk: Bumble's does this); the attempt counts as cancelled",
                       metadata: ["peer": "\(target)"])
        connectionCompleted(status: .unknownConnectionIdentifier, handle: 0, role: .central, peer: target,
                            interval: 0, latency: 0, timeout: 0)
        // Set after: the event stood in for is not itself late.
        awaitsLateCancelOutcome = true
    }

    /// Disconnects; `didDisconnect` follows.
    public func disconnect(_ connection: LEConnection, reason: HCIStatus = .remoteUserTerminatedConnection,
                           completion: @escaping (Result<Void, HCIError>) -> Void = { _ in }) {
        sequence([step(Disconnect(connectionHandle: connection.handle, reason: reason))], completion: completion)
    }

    /// As central, encrypts the link with a long-term key both sides hold (as HCI carries it).
    public func startEncryption(_ connection: LEConnection, longTermKey: [UInt8], rand: UInt64, ediv: UInt16,
                                completion: @escaping (Result<Void, HCIError>) -> Void = { _ in }) {
        guard connection.role == .central else { return completion(.failure(.notSupported("only the central starts encryption"))) }
        sequence([step(LEEnableEncryption(connectionHandle: connection.handle, randomNumber: rand,
                                          encryptedDiversifier: ediv, longTermKey: longTermKey))], completion: completion)
    }

    /// Asks for PHYs (LE Set PHY); `didUpdatePHYOf` follows when the link layer is done.
    /// `completion` says whether the controller took the request.
    public func setPHY(_ connection: LEConnection, tx: Set<LEPHY>, rx: Set<LEPHY>,
                       completion: @escaping (Result<Void, HCIError>) -> Void = { _ in }) {
        let mask = { (phys: Set<LEPHY>) in phys.reduce(UInt8(0)) { $0 | $1.maskBit } }
        sequence([step(LESetPHY(connectionHandle: connection.handle, allPHYs: 0, txPHYs: mask(tx), rxPHYs: mask(rx)))],
                 completion: completion)
    }

    /// Asks for new connection parameters: as central directly, as peripheral through the
    /// link layer when both controllers support it, else through L2CAP signalling.
    public func updateParameters(_ connection: LEConnection, _ parameters: ConnectionParameters,
                                 completion: @escaping (Result<Void, HCIError>) -> Void = { _ in }) {
        guard parameters.isValid else { return completion(.failure(.notSupported("invalid connection parameters"))) }
        if connection.role == .central || info?.leFeatures.contains(.connectionParametersRequest) == true {
            sequence([step(LEConnectionUpdate(connectionHandle: connection.handle, connectionIntervalMin: parameters.intervalMin,
                                              connectionIntervalMax: parameters.intervalMax, maxLatency: parameters.latency,
                                              supervisionTimeout: parameters.timeout, minCELength: 0, maxCELength: 0))],
                     completion: completion)
        } else {
            connection.l2cap.requestConnectionParameterUpdate(parameters) { result in
                switch result {
                case .success(true): completion(.success(()))
                case .success(false): completion(.failure(.status(.unacceptableConnectionParameters, command: "L2CAP Connection Parameter Update")))
                case .failure(let error): completion(.failure(.notSupported("\(error)")))
                }
            }
        }
    }
}
