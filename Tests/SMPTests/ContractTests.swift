import HCI
import Scheduling
import SMP
import Testing

@Suite struct SecurityManagerContractTests {
    @Test func reasonCodesAreTheSpecifications() {
        #expect(SMPPairingFailedReason.dhKeyCheckFailed.rawValue == 0x0B)
        #expect(SMPPairingFailedReason.allCases.count == 16)
    }
}
