import ByteCoding
import HCI
import LECrypto
import Logging
import Scheduling

extension VirtualController {
    /// T_IFS, the inter-frame space between packets of a connection event, in the loop's unit
    /// (nanoseconds: the timers of every packet exchange use it).
    static let interFrameSpaceNanoseconds: Int64 = 150_000

    // MARK: Establishment and teardown

    func allocateHandle() -> ConnectionHandle {
        while connections[nextHandle] != nil { nextHandle = nextHandle >= 0x0EFF ? 0x0040 : nextHandle + 1 }
        defer { nextHandle = nextHandle >= 0x0EFF ? 0x0040 : nextHandle + 1 }
        return nextHandle
    }

    /// The advertiser side: a CONNECT_IND was accepted. `localRPA`: the advertiser's address,
    /// when it was a local RPA from the resolving list.
    func acceptConnection(from initiator: HeardAddress, peerDevice: RadioDeviceID, llData: ConnectLLData,
                          advertisingHandle: UInt8 = 0xFF, localRPA: BluetoothAddress?) {
        establishConnection(role: .peripheral, peer: initiator.reported, peerDevice: peerDevice, llData: llData,
                            advertisingHandle: advertisingHandle, localRPA: localRPA, peerRPA: initiator.rpa)
    }

    /// `peer`: the peer's identity (type 0x02/0x03) when its RPA (`peerRPA`) resolved.
    func establishConnection(role: LERole, peer: LEAddress, peerDevice: RadioDeviceID, llData: ConnectLLData,
                             advertisingHandle: UInt8 = 0xFF, localRPA: BluetoothAddress? = nil, peerRPA: BluetoothAddress? = nil) {
        let connection = Connection(handle: allocateHandle(), role: role, peer: peer, peerDevice: peerDevice, llData: llData)
        connection.preferredMaxTxOctets = suggestedMaxTxOctets
        connection.txPHYPreference = defaultAllPhys & 0b01 != 0 ? 0b111 : defaultTxPhys
        connection.rxPHYPreference = defaultAllPhys & 0b10 != 0 ? 0b111 : defaultRxPhys
        connections[connection.handle] = connection
        handlesByAccessAddress[connection.accessAddress] = connection.handle
        sendConnectionComplete(status: .success, handle: connection.handle, role: role, peer: peer,
                               interval: llData.interval, latency: llData.latency, timeout: llData.timeout,
                               advertisingHandle: advertisingHandle, localRPA: localRPA, peerRPA: peerRPA)
        switch role {
        case .central:
            // Without a packet from the peripheral within six intervals the connection failed to
            // be established (Vol 6 Part B §4.5.2).
            connection.establishmentTimer = loop.schedule(after: connection.intervalDuration * 6) { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] in
                let `self` = weakSelf.object
                let connection = weakConnection.object
                guard let self, let connection, !connection.peerHeard, self.connections[connection.handle] === connection else { return }
                self.teardown(connection, reason: .connectionFailedToBeEstablished)
            }
            if radio.airTime == .timed { startConnectionEvents(connection, firstAfter: .microseconds(1250)) }
        case .peripheral:
            // In instant mode there are no connection events: answer the CONNECT_IND at once so
            // the central knows the connection exists.
            if radio.airTime == .instant { transmit(connection, DataPDU(llid: .continuation, payload: [])) }
        @unknown default:
            break
        }
        if !radio.isLinkReachable(connection.accessAddress) { armSupervision(connection) }
        // Controllers start the data length update on their own when the host asked for more.
        if connection.preferredMaxTxOctets > 27 {
            queueControl(connection, .lengthReq(localDataLength(connection)))
        }
    }

    /// Ends a connection: frees its buffers, closes its link and tells the host.
    func teardown(_ connection: Connection, reason: HCIStatus, notifyHost: Bool = true) {
        guard connections[connection.handle] === connection else { return }
        connection.supervisionTimer?.cancel()
        connection.establishmentTimer?.cancel()
        connection.eventTimer?.cancel()
        connections[connection.handle] = nil
        handlesByAccessAddress[connection.accessAddress] = nil
        // The host frees its own count of this connection's packets on Disconnection Complete
        // (Vol 4 Part E §4.3): give back the controller buffers they occupy and report nothing.
        while let queued = connection.dataQueue.popFirst() { if queued.releasesBuffer { freeACLBuffers += 1 } }
        completedPackets[connection.handle] = nil
        radio.closeLink(connection.accessAddress)
        if notifyHost {
            sendEvent(DisconnectionComplete(status: .success, connectionHandle: connection.handle, reason: reason))
        }
    }

    /// Drops a connection without telling the host (reset, power off); the peer times out.
    func abandon(_ connection: Connection) {
        radio.abandonLink(connection.accessAddress, by: radioID)
        teardown(connection, reason: .connectionTerminatedByLocalHost, notifyHost: false)
    }

    func armSupervision(_ connection: Connection) {
        guard connection.supervisionTimer == nil else { return }
        connection.supervisionTimer = loop.schedule(after: .milliseconds(Int64(connection.timeout) * 10)) { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] in
            let `self` = weakSelf.object
            let connection = weakConnection.object
            guard let self, let connection else { return }
            connection.supervisionTimer = nil
            self.teardown(connection, reason: .connectionTimeout)
        }
    }

    public func radioLink(_ accessAddress: UInt32, reachable: Bool) {
        guard let handle = handlesByAccessAddress[accessAddress], let connection = connections[handle] else { return }
        if reachable {
            connection.supervisionTimer?.cancel()
            connection.supervisionTimer = nil
            pump(connection)
        } else {
            armSupervision(connection)
        }
    }

    // MARK: Data from the host

    func handleACLFromHost(_ acl: ACLDataPacket) {
        guard freeACLBuffers > 0 else {
            logger.warning("host overflowed the ACL buffers")
            sendEvent(DataBufferOverflow(linkType: 0x01))
            return
        }
        guard acl.data.count <= Int(configuration.aclDataPacketLength) else {
            logger.warning("ACL packet of \(acl.data.count) bytes is longer than the buffers (\(configuration.aclDataPacketLength))")
            sendEvent(DataBufferOverflow(linkType: 0x01))
            return
        }
        guard let connection = connections[acl.handle], !connection.terminating else {
            logger.debug("ACL for unknown connection handle 0x\(String(acl.handle, radix: 16))")
            return
        }
        freeACLBuffers -= 1
        // An empty ACL packet carries nothing to send: its buffer is done at once.
        guard !acl.data.isEmpty else {
            packetCompleted(connection.handle)
            return
        }
        var llid: LLID = acl.boundary == .continuing ? .continuation : .start
        var offset = 0
        let size = Int(connection.maxTxOctets)
        while offset < acl.data.count {
            let end = min(offset + size, acl.data.count)
            let payload = offset == 0 && end == acl.data.count ? acl.data : Array(acl.data[offset..<end])
            connection.dataQueue.append(Connection.Queued(
                pdu: DataPDU(llid: llid, payload: payload), releasesBuffer: end == acl.data.count))
            llid = .continuation
            offset = end
        }
        pump(connection)
    }

    func packetCompleted(_ handle: ConnectionHandle) {
        freeACLBuffers += 1
        completedPackets[handle, default: 0] += 1
        guard !completedFlushScheduled else { return }
        completedFlushScheduled = true
        // Batched: one Number Of Completed Packets per loop turn, as controllers do.
        // The job holds the controller only until it runs (a weak capture cost more per packet).
        loop.execute { self.flushCompletedPackets() }
    }

    func flushCompletedPackets() {
        completedFlushScheduled = false
        var entries: [NumberOfCompletedPackets.Entry] = []
        entries.reserveCapacity(completedPackets.count)
        for (handle, count) in completedPackets where connections[handle] != nil {
            entries.append(NumberOfCompletedPackets.Entry(handle: handle, completedPackets: count))
        }
        if entries.count > 1 { entries.sort { $0.handle < $1.handle } }
        completedPackets.removeAll(keepingCapacity: true)
        guard !entries.isEmpty else { return }
        send(.event(NumberOfCompletedPackets(entries: entries).packet))
    }

    // MARK: Transmission

    func queueControl(_ connection: Connection, _ pdu: LLControlPDU) {
        connection.controlQueue.append(.control(pdu))
        pump(connection)
    }

    /// Instant mode sends whatever is queued right away; timed mode waits for connection events.
    func pump(_ connection: Connection) {
        guard radio.airTime == .instant, connections[connection.handle] === connection,
              radio.isLinkReachable(connection.accessAddress) else { return }
        while let pdu = nextPDU(connection) { send(pdu, on: connection) }
    }

    /// The next PDU to send: control first; data unless paused by an encryption procedure.
    /// (A struct, not a tuple: a tuple holding a `DataPDU` was destroyed through the runtime's
    /// unspecialised tuple witness, ~120 instructions a PDU.)
    func nextPDU(_ connection: Connection) -> Connection.Queued? {
        if let control = connection.controlQueue.popFirst() { return Connection.Queued(pdu: control, releasesBuffer: false) }
        if connection.dataPaused { return nil }
        return connection.dataQueue.popFirst()
    }

    private func send(_ item: consuming Connection.Queued, on connection: Connection) {
        var terminates = false
        if item.pdu.llid == .control, case .terminateInd? = try? LLControlPDU(decoding: item.pdu.payload[...]) { terminates = true }
        let releasesBuffer = item.releasesBuffer
        // The PDU is moved down to the radio's queue (a copy per layer cost a retain and a release).
        let delivered = transmit(connection, item.takePDU())
        if delivered != nil && releasesBuffer { packetCompleted(connection.handle) }
        if terminates { teardown(connection, reason: .connectionTerminatedByLocalHost) }
    }

    /// Puts one PDU on the air; returns its air time, or nil if the peer could not hear it.
    @discardableResult
    func transmit(_ connection: Connection, _ pdu: consuming DataPDU) -> Int64? {
        if connection.txEncrypted && !pdu.payload.isEmpty { pdu.mic = connection.micValue }
        return radio.transmit(pdu, accessAddress: connection.accessAddress, from: radioID, phy: connection.txPHY)
    }

    // MARK: Reception

    public func radioDidReceive(_ pdu: DataPDU, accessAddress: UInt32, rssi: Int8) {
        guard let handle = handlesByAccessAddress[accessAddress], let connection = connections[handle] else { return }
        connection.lastRSSI = rssi
        if !connection.peerHeard {
            connection.peerHeard = true
            connection.establishmentTimer?.cancel()
            connection.establishmentTimer = nil
        }
        if connection.rxEncrypted && !pdu.payload.isEmpty && pdu.mic != connection.micValue {
            // The keys differ: real controllers fail the MIC check and drop the link.
            logger.warning("MIC failure on handle 0x\(String(handle, radix: 16))")
            transmit(connection, .control(.terminateInd(errorCode: HCIStatus.connectionTerminatedMICFailure.rawValue)))
            teardown(connection, reason: .connectionTerminatedMICFailure)
            return
        }
        switch pdu.llid {
        case .control:
            do {
                handleControl(try LLControlPDU(decoding: pdu.payload[...]), on: connection)
            } catch {
                queueControl(connection, .unknownRsp(unknownType: pdu.payload.first ?? 0))
            }
        case .start:
            send(.acl(ACLDataPacket(handle: handle, boundary: .firstFlushable, data: pdu.payload)))
        case .continuation:
            if !pdu.payload.isEmpty {
                send(.acl(ACLDataPacket(handle: handle, boundary: .continuing, data: pdu.payload)))
            }
        }
        if radio.airTime == .timed { connectionEventReceived(connection, pdu) }
    }

    // MARK: Timed mode: connection events

    /// The central opens a connection event every interval; within it the two sides alternate
    /// packets separated by T_IFS while either has more to send and the event has room.
    func startConnectionEvents(_ connection: Connection, firstAfter delay: Duration) {
        connection.eventTimer = loop.schedule(after: delay) { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] in
            let `self` = weakSelf.object
            let connection = weakConnection.object
            guard let self, let connection else { return }
            self.connectionEvent(connection)
        }
    }

    private func connectionEvent(_ connection: Connection) {
        guard connections[connection.handle] === connection else { return }
        connection.eventCounter &+= 1
        let interval = connection.intervalNanoseconds
        connection.eventEnd = LoopInstant(nanoseconds: loop.now.nanoseconds &+ interval)
        connection.eventTimer = loop.schedule(afterNanoseconds: interval) { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] in
            let `self` = weakSelf.object
            let connection = weakConnection.object
            guard let self, let connection else { return }
            self.connectionEvent(connection)
        }
        centralSendInEvent(connection)
    }

    private func centralSendInEvent(_ connection: Connection) {
        guard radio.isLinkReachable(connection.accessAddress) else { return }
        var item = nextPDU(connection) ?? Connection.Queued(pdu: DataPDU(llid: .continuation, payload: []), releasesBuffer: false)
        item.pdu.moreData = hasMoreToSend(connection)
        send(item, on: connection)
    }

    private func hasMoreToSend(_ connection: Connection) -> Bool {
        !connection.controlQueue.isEmpty || (!connection.dataPaused && !connection.dataQueue.isEmpty)
    }

    private func connectionEventReceived(_ connection: Connection, _ pdu: DataPDU) {
        guard connections[connection.handle] === connection else { return }
        switch connection.role {
        case .peripheral:
            // Answer every packet from the central after T_IFS. Strong captures: the timer is
            // 150 µs long and never re-arms itself, and weak ones cost side-table work per packet.
            loop.schedule(afterNanoseconds: Self.interFrameSpaceNanoseconds) { [self, connection] in
                guard connections[connection.handle] === connection else { return }
                var reply = self.nextPDU(connection) ?? Connection.Queued(pdu: DataPDU(llid: .continuation, payload: []), releasesBuffer: false)
                reply.pdu.moreData = self.hasMoreToSend(connection)
                self.send(reply, on: connection)
            }
        case .central:
            // Continue the event while either side has more and another whole exchange fits
            // before the event ends: this packet, T_IFS, the longest reply the peripheral may
            // send (its data length), T_IFS. The exchange belongs to this event: one the next
            // event overtook ends here (a new event starts its own exchanges).
            guard pdu.moreData || hasMoreToSend(connection), let end = connection.eventEnd else { return }
            let event = connection.eventCounter
            let mic = connection.rxEncrypted ? 4 : 0
            let exchange = Self.interFrameSpaceNanoseconds * 2
                + connection.txPHY.airTimeNanoseconds(pduOctets: nextPDUOctets(connection))
                + connection.rxPHY.airTimeNanoseconds(pduOctets: 2 + Int(connection.maxRxOctets) + mic)
            guard loop.now.nanoseconds + Self.interFrameSpaceNanoseconds + exchange <= end.nanoseconds else { return }
            loop.schedule(afterNanoseconds: Self.interFrameSpaceNanoseconds) { [self, connection] in
                guard connection.eventCounter == event, connections[connection.handle] === connection else { return }
                centralSendInEvent(connection)
            }
        @unknown default:
            break
        }
    }

    private func nextPDUOctets(_ connection: Connection) -> Int {
        let mic = connection.txEncrypted ? 4 : 0
        if let control = connection.controlQueue.first { return 2 + control.payload.count + mic }
        if !connection.dataPaused, let data = connection.dataQueue.first { return 2 + data.pdu.payload.count + mic }
        return 2
    }
}
