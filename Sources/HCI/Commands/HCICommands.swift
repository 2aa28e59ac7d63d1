/// Every typed command, for logs and for a controller that must tell known from unknown opcodes.
public enum HCICommands {
    /// The command types this module defines.
    public static let all: [any HCICommand.Type] = [
        // Link Control
        Disconnect.self, ReadRemoteVersionInformation.self,
        // Controller & Baseband
        SetEventMask.self, Reset.self, SetEventMaskPage2.self,
        // Informational
        ReadLocalVersionInformation.self, ReadLocalSupportedCommands.self, ReadLocalSupportedFeatures.self,
        ReadBufferSize.self, ReadBDADDR.self,
        // LE Controller
        LESetEventMask.self, LEReadBufferSizeV1.self, LEReadBufferSizeV2.self, LEReadLocalSupportedFeatures.self,
        LESetRandomAddress.self, LESetAdvertisingParameters.self, LESetAdvertisingData.self,
        LESetScanResponseData.self, LESetAdvertisingEnable.self, LESetScanParameters.self, LESetScanEnable.self,
        LECreateConnection.self, LECreateConnectionCancel.self,
        LEReadFilterAcceptListSize.self, LEClearFilterAcceptList.self, LEAddDeviceToFilterAcceptList.self,
        LERemoveDeviceFromFilterAcceptList.self, LEConnectionUpdate.self, LEReadRemoteFeatures.self,
        LEEncrypt.self, LERand.self, LEEnableEncryption.self, LELongTermKeyRequestReply.self,
        LELongTermKeyRequestNegativeReply.self, LEReadSupportedStates.self,
        LERemoteConnectionParameterRequestReply.self, LERemoteConnectionParameterRequestNegativeReply.self,
        LESetDataLength.self, LEReadSuggestedDefaultDataLength.self, LEWriteSuggestedDefaultDataLength.self,
        LEAddDeviceToResolvingList.self, LERemoveDeviceFromResolvingList.self, LEClearResolvingList.self,
        LEReadResolvingListSize.self, LEReadPeerResolvableAddress.self, LEReadLocalResolvableAddress.self,
        LESetAddressResolutionEnable.self, LESetResolvablePrivateAddressTimeout.self,
        LEReadMaximumDataLength.self, LEReadPHY.self, LESetDefaultPHY.self, LESetPHY.self,
        LESetAdvertisingSetRandomAddress.self, LESetExtendedAdvertisingParameters.self,
        LESetExtendedAdvertisingData.self, LESetExtendedScanResponseData.self, LESetExtendedAdvertisingEnable.self,
        LEReadMaximumAdvertisingDataLength.self, LEReadNumberOfSupportedAdvertisingSets.self,
        LERemoveAdvertisingSet.self, LEClearAdvertisingSets.self, LESetExtendedScanParameters.self,
        LESetExtendedScanEnable.self, LEExtendedCreateConnection.self, LESetPrivacyMode.self,
        // Status Parameters
        ReadRSSI.self,
    ]

    private static let byOpcode: [UInt16: any HCICommand.Type] = Dictionary(
        uniqueKeysWithValues: all.map { ($0.opcode.rawValue, $0) })

    /// The spec's name of a command this module knows, or nil.
    public static func name(of opcode: HCIOpcode) -> String? { byOpcode[opcode.rawValue]?.name }

    /// The command type with this opcode, or nil for a command this module does not define.
    public static func type(of opcode: HCIOpcode) -> (any HCICommand.Type)? { byOpcode[opcode.rawValue] }
}
