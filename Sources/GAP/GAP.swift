// The advertising data codec lands here.
