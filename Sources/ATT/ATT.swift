// The ATT PDU codec lands here.
