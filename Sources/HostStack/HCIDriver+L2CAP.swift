import HCIDriver
import L2CAP

// The HCI driver is the layer under L2CAP: whole PDUs out per connection, and its queue depth.
// Declared here, where both layers meet, so that L2CAP does not depend on the driver.
extension HCIDriver: L2CAPLowerLayer {}
