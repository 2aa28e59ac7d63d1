import ByteCoding
import HCI
import LECrypto
import Logging

extension VirtualController {
    /// HCI version 0x0D: Core 5.4. Company 0xFFFF: reserved for tests and internal use.
    static let hciVersion: UInt8 = 0x0D
    static let companyIdentifier: UInt16 = 0xFFFF
    static let subversion: UInt16 = 0x0001

    /// LE features this link layer implements (Vol 6 Part B §4.6).
    static let leFeatures: LEFeatures = [
        .leEncryption, .connectionParametersRequest, .extendedRejectIndication,
        .peripheralInitiatedFeaturesExchange, .lePing, .leDataPacketLengthExtension, .llPrivacy,
        .le2MPHY, .leCodedPHY, .leExtendedAdvertising,
    ]

    /// The commands answered here, marked in Read Local Supported Commands.
    static let implementedOpcodes: [HCIOpcode] = [
        Disconnect.opcode, ReadRemoteVersionInformation.opcode, SetEventMask.opcode, Reset.opcode,
        ReadLocalVersionInformation.opcode, ReadLocalSupportedFeatures.opcode, ReadBufferSize.opcode,
        ReadBDADDR.opcode, ReadRSSI.opcode, SetEventMaskPage2.opcode, LESetEventMask.opcode,
        LEReadBufferSizeV1.opcode, LEReadBufferSizeV2.opcode, LEReadLocalSupportedFeatures.opcode,
        LESetRandomAddress.opcode, LESetAdvertisingParameters.opcode, LESetAdvertisingData.opcode,
        LESetScanResponseData.opcode, LESetAdvertisingEnable.opcode, LESetScanParameters.opcode,
        LESetScanEnable.opcode, LECreateConnection.opcode, LECreateConnectionCancel.opcode,
        LEReadFilterAcceptListSize.opcode, LEClearFilterAcceptList.opcode,
        LEAddDeviceToFilterAcceptList.opcode, LERemoveDeviceFromFilterAcceptList.opcode,
        LEConnectionUpdate.opcode, LEReadRemoteFeatures.opcode, LEEncrypt.opcode, LERand.opcode,
        LEEnableEncryption.opcode, LELongTermKeyRequestReply.opcode, LELongTermKeyRequestNegativeReply.opcode,
        LEReadSupportedStates.opcode, LERemoteConnectionParameterRequestReply.opcode,
        LERemoteConnectionParameterRequestNegativeReply.opcode, LESetDataLength.opcode,
        LEReadSuggestedDefaultDataLength.opcode, LEWriteSuggestedDefaultDataLength.opcode,
        LEAddDeviceToResolvingList.opcode, LERemoveDeviceFromResolvingList.opcode, LEClearResolvingList.opcode,
        LEReadResolvingListSize.opcode, LEReadPeerResolvableAddress.opcode, LEReadLocalResolvableAddress.opcode,
        LESetAddressResolutionEnable.opcode, LESetResolvablePrivateAddressTimeout.opcode, LEReadMaximumDataLength.opcode,
        LEReadPHY.opcode, LESetDefaultPHY.opcode, LESetPHY.opcode, LESetPrivacyMode.opcode,
    ] + extendedAdvertisingOpcodes

    /// The LE features this controller claims: without extended advertising when configured so.
    var leFeatures: LEFeatures {
        configuration.supportsExtendedAdvertising ? Self.leFeatures : Self.leFeatures.subtracting(.leExtendedAdvertising)
    }

    /// The commands this controller answers and marks as supported.
    var implementedOpcodes: [HCIOpcode] {
        configuration.supportsExtendedAdvertising
            ? Self.implementedOpcodes
            : Self.implementedOpcodes.filter { !Self.extendedAdvertisingOpcodes.contains($0) }
    }

    /// Decodes a command, answering Invalid HCI Command Parameters when it is malformed.
    func decode<C: HCICommand>(_: C.Type, _ packet: HCICommandPacket) -> C? {
        do {
            return try C(packet: packet)
        } catch {
            logger.debug("\(C.name): \(error)")
            reject(C.self, .invalidHCICommandParameters)
            return nil
        }
    }

    /// Answers a command with an error status, the way the command is answered.
    func reject<C: HCICommand>(_: C.Type, _ status: HCIStatus) {
        switch C.completion {
        case .commandStatus: commandStatus(C.opcode, status)
        case .commandComplete: commandComplete(C.opcode, status: status)
        }
    }

    /// Answers a command whose return parameters carry the connection handle after the status.
    func completeWithHandle(_ opcode: HCIOpcode, _ status: HCIStatus, _ handle: ConnectionHandle) {
        var w = ByteWriter(capacity: 3)
        w.u8(status.rawValue)
        w.u16(handle)
        send(.event(CommandComplete(numHCICommandPackets: configuration.commandCredits, opcode: opcode,
                                    returnParameters: w.bytes).packet))
    }

    func handleCommand(_ packet: HCICommandPacket) {
        // Extended advertising/scanning/initiating, and the legacy-or-extended rule.
        if handleAdvertisingFamilyCommand(packet) { return }
        if handlePrivacyCommand(packet) { return }
        switch packet.opcode {
        // Controller & baseband, informational, status.
        case Reset.opcode:
            guard decode(Reset.self, packet) != nil else { return }
            resetState()
            commandComplete(Reset.opcode, status: .success)
        case SetEventMask.opcode:
            guard let c = decode(SetEventMask.self, packet) else { return }
            eventMask = c.eventMask
            commandComplete(SetEventMask.opcode, status: .success)
        case SetEventMaskPage2.opcode:
            guard let c = decode(SetEventMaskPage2.self, packet) else { return }
            eventMaskPage2 = c.eventMaskPage2
            commandComplete(SetEventMaskPage2.opcode, status: .success)
        case ReadLocalVersionInformation.opcode:
            guard decode(ReadLocalVersionInformation.self, packet) != nil else { return }
            commandComplete(packet.opcode, ReadLocalVersionInformation.ReturnParameters(
                status: .success, hciVersion: Self.hciVersion, hciSubversion: Self.subversion,
                lmpVersion: Self.hciVersion, companyIdentifier: Self.companyIdentifier, lmpSubversion: Self.subversion))
        case ReadLocalSupportedCommands.opcode:
            guard decode(ReadLocalSupportedCommands.self, packet) != nil else { return }
            commandComplete(packet.opcode, ReadLocalSupportedCommands.ReturnParameters(
                status: .success, supportedCommands: SupportedCommandsTable.bitmap(supporting: implementedOpcodes)))
        case ReadLocalSupportedFeatures.opcode:
            guard decode(ReadLocalSupportedFeatures.self, packet) != nil else { return }
            // LMP features: bit 37 "BR/EDR Not Supported", bit 38 "LE Supported (Controller)".
            commandComplete(packet.opcode, ReadLocalSupportedFeatures.ReturnParameters(
                status: .success, lmpFeatures: 1 << 37 | 1 << 38))
        case ReadBufferSize.opcode:
            guard decode(ReadBufferSize.self, packet) != nil else { return }
            commandComplete(packet.opcode, ReadBufferSize.ReturnParameters(
                status: .success, aclDataPacketLength: configuration.aclDataPacketLength, synchronousDataPacketLength: 0,
                totalNumACLDataPackets: UInt16(configuration.totalACLDataPackets), totalNumSynchronousDataPackets: 0))
        case ReadBDADDR.opcode:
            guard decode(ReadBDADDR.self, packet) != nil else { return }
            commandComplete(packet.opcode, ReadBDADDR.ReturnParameters(status: .success, bdAddr: publicAddress))
        case ReadRSSI.opcode:
            guard let c = decode(ReadRSSI.self, packet) else { return }
            guard let connection = connections[c.connectionHandle] else {
                commandComplete(packet.opcode, ReadRSSI.ReturnParameters(
                    status: .unknownConnectionIdentifier, connectionHandle: c.connectionHandle, rssi: 127))
                return
            }
            let rssi = radio.rssi(from: connection.peerDevice, to: radioID) ?? connection.lastRSSI
            commandComplete(packet.opcode, ReadRSSI.ReturnParameters(status: .success, connectionHandle: c.connectionHandle, rssi: rssi))

        // LE controller: configuration.
        case LESetEventMask.opcode:
            guard let c = decode(LESetEventMask.self, packet) else { return }
            leEventMask = c.leEventMask
            commandComplete(packet.opcode, status: .success)
        case LEReadBufferSizeV1.opcode:
            guard decode(LEReadBufferSizeV1.self, packet) != nil else { return }
            commandComplete(packet.opcode, LEReadBufferSizeV1.ReturnParameters(
                status: .success, leACLDataPacketLength: configuration.aclDataPacketLength,
                totalNumLEACLDataPackets: configuration.totalACLDataPackets))
        case LEReadBufferSizeV2.opcode:
            guard decode(LEReadBufferSizeV2.self, packet) != nil else { return }
            commandComplete(packet.opcode, LEReadBufferSizeV2.ReturnParameters(
                status: .success, leACLDataPacketLength: configuration.aclDataPacketLength,
                totalNumLEACLDataPackets: configuration.totalACLDataPackets, isoDataPacketLength: 0, totalNumISODataPackets: 0))
        case LEReadLocalSupportedFeatures.opcode:
            guard decode(LEReadLocalSupportedFeatures.self, packet) != nil else { return }
            commandComplete(packet.opcode, LEReadLocalSupportedFeatures.ReturnParameters(
                status: .success, leFeatures: leFeatures.rawValue))
        case LEReadSupportedStates.opcode:
            guard decode(LEReadSupportedStates.self, packet) != nil else { return }
            commandComplete(packet.opcode, LEReadSupportedStates.ReturnParameters(status: .success, leStates: 0x3FF_FFFF_FFFF))
        case LESetRandomAddress.opcode:
            guard let c = decode(LESetRandomAddress.self, packet) else { return }
            // Not while advertising or scanning could be using it (Vol 4 Part E §7.8.4).
            if advertising.enabled || scanning.enabled || initiating != nil {
                commandComplete(packet.opcode, status: .commandDisallowed)
                return
            }
            randomAddress = c.randomAddress
            commandComplete(packet.opcode, status: .success)
        case LERand.opcode:
            guard decode(LERand.self, packet) != nil else { return }
            commandComplete(packet.opcode, LERand.ReturnParameters(status: .success, randomNumber: radio.randomUInt64()))
        case LEEncrypt.opcode:
            guard let c = decode(LEEncrypt.self, packet) else { return }
            let encrypted = LECrypto.hciEncrypt(keyLSB: c.key, plaintextLSB: c.plaintextData)
            commandComplete(packet.opcode, LEEncrypt.ReturnParameters(status: .success, encryptedData: encrypted))

        // Lists.
        case LEReadFilterAcceptListSize.opcode:
            guard decode(LEReadFilterAcceptListSize.self, packet) != nil else { return }
            commandComplete(packet.opcode, LEReadFilterAcceptListSize.ReturnParameters(
                status: .success, filterAcceptListSize: configuration.filterAcceptListSize))
        case LEClearFilterAcceptList.opcode:
            guard decode(LEClearFilterAcceptList.self, packet) != nil else { return }
            guard !filterAcceptListInUse else { return commandComplete(packet.opcode, status: .commandDisallowed) }
            filterAcceptList = []
            commandComplete(packet.opcode, status: .success)
        case LEAddDeviceToFilterAcceptList.opcode:
            guard let c = decode(LEAddDeviceToFilterAcceptList.self, packet) else { return }
            guard !filterAcceptListInUse else { return commandComplete(packet.opcode, status: .commandDisallowed) }
            // Anonymous advertising needs extended advertising, which this controller doesn't do:
            // the entry is accepted and matches nothing.
            guard let type = LEAddressType(rawValue: c.addressType.rawValue) else {
                return commandComplete(packet.opcode, status: .success)
            }
            let entry = LEAddress(type, c.address)
            if !isInFilterAcceptList(entry) {
                guard filterAcceptList.count < Int(configuration.filterAcceptListSize) else {
                    return commandComplete(packet.opcode, status: .memoryCapacityExceeded)
                }
                filterAcceptList.append(entry)
            }
            commandComplete(packet.opcode, status: .success)
        case LERemoveDeviceFromFilterAcceptList.opcode:
            guard let c = decode(LERemoveDeviceFromFilterAcceptList.self, packet) else { return }
            guard !filterAcceptListInUse else { return commandComplete(packet.opcode, status: .commandDisallowed) }
            guard let type = LEAddressType(rawValue: c.addressType.rawValue) else {
                return commandComplete(packet.opcode, status: .success)
            }
            let entry = LEAddress(type, c.address)
            filterAcceptList.removeAll { $0.address == entry.address && $0.isRandom == entry.isRandom }
            commandComplete(packet.opcode, status: .success)
        case LEAddDeviceToResolvingList.opcode:
            guard let c = decode(LEAddDeviceToResolvingList.self, packet) else { return }
            guard !addressResolutionInUse else { return commandComplete(packet.opcode, status: .commandDisallowed) }
            let peer = LEAddress(c.peerIdentityAddressType, c.peerIdentityAddress)
            if resolvingListIndex(of: peer) != nil {
                return commandComplete(packet.opcode, status: .invalidHCICommandParameters)
            }
            guard resolvingList.count < Int(configuration.resolvingListSize) else {
                return commandComplete(packet.opcode, status: .memoryCapacityExceeded)
            }
            resolvingList.append(ResolvingListEntry(peer: peer, peerIRK: c.peerIRK, localIRK: c.localIRK))
            commandComplete(packet.opcode, status: .success)
        case LERemoveDeviceFromResolvingList.opcode:
            guard let c = decode(LERemoveDeviceFromResolvingList.self, packet) else { return }
            guard !addressResolutionInUse else { return commandComplete(packet.opcode, status: .commandDisallowed) }
            let peer = LEAddress(c.peerIdentityAddressType, c.peerIdentityAddress)
            guard let index = resolvingListIndex(of: peer) else {
                return commandComplete(packet.opcode, status: .unknownConnectionIdentifier)
            }
            resolvingList.remove(at: index)
            commandComplete(packet.opcode, status: .success)
        case LEClearResolvingList.opcode:
            guard decode(LEClearResolvingList.self, packet) != nil else { return }
            guard !addressResolutionInUse else { return commandComplete(packet.opcode, status: .commandDisallowed) }
            resolvingList = []
            commandComplete(packet.opcode, status: .success)
        case LEReadResolvingListSize.opcode:
            guard decode(LEReadResolvingListSize.self, packet) != nil else { return }
            commandComplete(packet.opcode, LEReadResolvingListSize.ReturnParameters(
                status: .success, resolvingListSize: configuration.resolvingListSize))
        case LESetAddressResolutionEnable.opcode:
            guard let c = decode(LESetAddressResolutionEnable.self, packet) else { return }
            guard !(advertising.enabled || scanning.enabled || initiating != nil) else {
                return commandComplete(packet.opcode, status: .commandDisallowed)
            }
            // Enabling when enabled changes nothing, so the RPA timer keeps running.
            if addressResolutionEnabled != c.addressResolutionEnable {
                addressResolutionEnabled = c.addressResolutionEnable
                restartRPATimer()
            }
            commandComplete(packet.opcode, status: .success)
        case LESetResolvablePrivateAddressTimeout.opcode:
            guard let c = decode(LESetResolvablePrivateAddressTimeout.self, packet) else { return }
            guard (0x0001...0x0E10).contains(c.rpaTimeout) else {
                return commandComplete(packet.opcode, status: .invalidHCICommandParameters)
            }
            rpaTimeoutSeconds = c.rpaTimeout
            restartRPATimer()
            commandComplete(packet.opcode, status: .success)

        // Data length and PHY defaults.
        case LEReadSuggestedDefaultDataLength.opcode:
            guard decode(LEReadSuggestedDefaultDataLength.self, packet) != nil else { return }
            commandComplete(packet.opcode, LEReadSuggestedDefaultDataLength.ReturnParameters(
                status: .success, suggestedMaxTXOctets: suggestedMaxTxOctets, suggestedMaxTXTime: suggestedMaxTxTime))
        case LEWriteSuggestedDefaultDataLength.opcode:
            guard let c = decode(LEWriteSuggestedDefaultDataLength.self, packet) else { return }
            guard (27...251).contains(c.suggestedMaxTXOctets), (328...17040).contains(c.suggestedMaxTXTime) else {
                return commandComplete(packet.opcode, status: .invalidHCICommandParameters)
            }
            suggestedMaxTxOctets = c.suggestedMaxTXOctets
            suggestedMaxTxTime = c.suggestedMaxTXTime
            commandComplete(packet.opcode, status: .success)
        case LEReadMaximumDataLength.opcode:
            guard decode(LEReadMaximumDataLength.self, packet) != nil else { return }
            commandComplete(packet.opcode, LEReadMaximumDataLength.ReturnParameters(
                status: .success, supportedMaxTXOctets: configuration.supportedMaxTxOctets,
                supportedMaxTXTime: maxTime(octets: configuration.supportedMaxTxOctets),
                supportedMaxRXOctets: configuration.supportedMaxRxOctets,
                supportedMaxRXTime: maxTime(octets: configuration.supportedMaxRxOctets)))
        case LESetDefaultPHY.opcode:
            guard let c = decode(LESetDefaultPHY.self, packet) else { return }
            guard validPHYPreferences(allPhys: c.allPHYs, txPhys: c.txPHYs, rxPhys: c.rxPHYs) else {
                return commandComplete(packet.opcode, status: .unsupportedFeatureOrParameterValue)
            }
            defaultAllPhys = c.allPHYs
            defaultTxPhys = c.txPHYs
            defaultRxPhys = c.rxPHYs
            commandComplete(packet.opcode, status: .success)

        // Advertising, scanning, initiating.
        case LESetAdvertisingParameters.opcode:
            guard let c = decode(LESetAdvertisingParameters.self, packet) else { return }
            setAdvertisingParameters(c)
        case LESetAdvertisingData.opcode:
            guard let c = decode(LESetAdvertisingData.self, packet) else { return }
            advertising.data = c.advertisingData
            commandComplete(packet.opcode, status: .success)
        case LESetScanResponseData.opcode:
            guard let c = decode(LESetScanResponseData.self, packet) else { return }
            advertising.scanResponseData = c.scanResponseData
            commandComplete(packet.opcode, status: .success)
        case LESetAdvertisingEnable.opcode:
            guard let c = decode(LESetAdvertisingEnable.self, packet) else { return }
            setAdvertisingEnable(c.advertisingEnable)
        case LESetScanParameters.opcode:
            guard let c = decode(LESetScanParameters.self, packet) else { return }
            setScanParameters(c)
        case LESetScanEnable.opcode:
            guard let c = decode(LESetScanEnable.self, packet) else { return }
            setScanEnable(c.leScanEnable, filterDuplicates: c.filterDuplicates)
        case LECreateConnection.opcode:
            guard let c = decode(LECreateConnection.self, packet) else { return }
            createConnection(c)
        case LECreateConnectionCancel.opcode:
            guard decode(LECreateConnectionCancel.self, packet) != nil else { return }
            cancelCreateConnection()

        // Connections.
        case Disconnect.opcode:
            guard let c = decode(Disconnect.self, packet) else { return }
            disconnectCommand(c)
        case LEConnectionUpdate.opcode:
            guard let c = decode(LEConnectionUpdate.self, packet) else { return }
            connectionUpdateCommand(c)
        case LERemoteConnectionParameterRequestReply.opcode:
            guard let c = decode(LERemoteConnectionParameterRequestReply.self, packet) else { return }
            remoteConnectionParameterRequestReply(c)
        case LERemoteConnectionParameterRequestNegativeReply.opcode:
            guard let c = decode(LERemoteConnectionParameterRequestNegativeReply.self, packet) else { return }
            remoteConnectionParameterRequestNegativeReply(c)
        case LEReadRemoteFeatures.opcode:
            guard let c = decode(LEReadRemoteFeatures.self, packet) else { return }
            readRemoteFeatures(c.connectionHandle)
        case ReadRemoteVersionInformation.opcode:
            guard let c = decode(ReadRemoteVersionInformation.self, packet) else { return }
            readRemoteVersion(c.connectionHandle)
        case LESetDataLength.opcode:
            guard let c = decode(LESetDataLength.self, packet) else { return }
            setDataLength(c)
        case LESetPHY.opcode:
            guard let c = decode(LESetPHY.self, packet) else { return }
            setPHY(c)
        case LEReadPHY.opcode:
            guard let c = decode(LEReadPHY.self, packet) else { return }
            guard let connection = connections[c.connectionHandle] else {
                return commandComplete(packet.opcode, LEReadPHY.ReturnParameters(
                    status: .unknownConnectionIdentifier, connectionHandle: c.connectionHandle, txPHY: .le1M, rxPHY: .le1M))
            }
            commandComplete(packet.opcode, LEReadPHY.ReturnParameters(
                status: .success, connectionHandle: c.connectionHandle, txPHY: connection.txPHY, rxPHY: connection.rxPHY))
        case LEEnableEncryption.opcode:
            guard let c = decode(LEEnableEncryption.self, packet) else { return }
            enableEncryption(c)
        case LELongTermKeyRequestReply.opcode:
            guard let c = decode(LELongTermKeyRequestReply.self, packet) else { return }
            longTermKeyReply(c.connectionHandle, ltk: c.longTermKey, opcode: packet.opcode)
        case LELongTermKeyRequestNegativeReply.opcode:
            guard let c = decode(LELongTermKeyRequestNegativeReply.self, packet) else { return }
            longTermKeyReply(c.connectionHandle, ltk: nil, opcode: packet.opcode)

        default:
            // Always an answer, never silence: hosts wait for one.
            logger.debug("unknown command \(packet.opcode)")
            commandComplete(packet.opcode, status: .unknownHCICommand)
        }
    }

    var filterAcceptListInUse: Bool {
        (advertising.enabled && advertising.parameters.advertisingFilterPolicy != .acceptAll)
            || (scanning.enabled && (scanning.parameters.scanningFilterPolicy == .basicFiltered
                || scanning.parameters.scanningFilterPolicy == .extendedFiltered))
            || initiating?.initiatorFilterPolicy == .filterAcceptList
            || advertisingSetsUseFilterAcceptList
    }

    var addressResolutionInUse: Bool {
        addressResolutionEnabled && (advertising.enabled || scanning.enabled || initiating != nil)
    }

    /// The longest time a PDU of `octets` takes on the 1M PHY with MIC, as LL_LENGTH PDUs state it.
    func maxTime(octets: UInt16) -> UInt16 { UInt16((Int(octets) + 14) * 8) }

    func validPHYPreferences(allPhys: UInt8, txPhys: UInt8, rxPhys: UInt8) -> Bool {
        // Bits above Coded are reserved; a direction without "no preference" needs some PHY.
        guard txPhys & ~0b111 == 0, rxPhys & ~0b111 == 0, allPhys & ~0b11 == 0 else { return false }
        if allPhys & 0b01 == 0 && txPhys == 0 { return false }
        if allPhys & 0b10 == 0 && rxPhys == 0 { return false }
        return true
    }
}
